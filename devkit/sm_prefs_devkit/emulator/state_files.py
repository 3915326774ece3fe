"""The files the emulator keeps beside its state file, each replaced whole (write, then rename), so that a
crash never leaves half of one.

The S3 objects are an index (bucket, key, ETag), replaced at each change, and each object's body in a file of
its own named by its ETag, written once.

A change to one object then writes the index and that object's body. Writing every body at every change, as
the emulator did before, made a long session quadratic: Airflow's S3 task logs rewrite their object at each
upload, and the logs bucket grows all day.
"""

from __future__ import annotations

import base64
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

INDEX_FORMAT = 2
# What S3 (and moto) make an ETag of: the body's MD5, or for a multipart upload that of its parts' and their
# count. A name of any other shape is refused, so an index cannot point outside the bodies' folder.
ETAG = re.compile(r"[0-9a-f]{32}(-[0-9]+)?")

Index = dict[str, dict[str, str]]  # bucket -> key -> ETag


def inline_objects(saved: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, bytes]]:
    """Objects as earlier emulators kept them, in ``<state file>.s3`` or inside the state file: bodies in base64."""
    return {bucket: {key: base64.b64decode(body) for key, body in objects.items()} for bucket, objects in saved.items()}


def write_whole(target: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(target: Path, document: Any) -> None:
    # allow_nan=False: a file the next start could not read is never written.
    write_whole(target, json.dumps(document, allow_nan=False).encode())


class ObjectFiles:
    def __init__(self, index: Path) -> None:
        self.index = index
        self.bodies = index.with_name(index.name + ".d")
        self._on_disk: set[str] | None = None  # the ETags with a body file; read from the folder when first needed

    def exists(self) -> bool:
        return self.index.exists()

    def on_disk(self) -> set[str]:
        if self._on_disk is None:
            found = self.bodies.iterdir() if self.bodies.is_dir() else ()
            self._on_disk = {path.name for path in found if ETAG.fullmatch(path.name)}
        return self._on_disk

    def read(self) -> dict[str, dict[str, bytes]]:
        """Every bucket's objects. An index of the format before this one held the bodies themselves."""
        saved: Any = json.loads(self.index.read_text(encoding="utf-8"))
        if not isinstance(saved, dict):
            raise ValueError("the objects' index is not a JSON object")
        if saved.get("format") != INDEX_FORMAT:
            return inline_objects(saved)
        buckets = saved["buckets"]
        return {bucket: {key: self._body(etag) for key, etag in objects.items()} for bucket, objects in buckets.items()}

    def _body(self, etag: object) -> bytes:
        if not isinstance(etag, str) or not ETAG.fullmatch(etag):
            raise ValueError(f"the objects' index names a body that is not an ETag: {etag!r}")
        return (self.bodies / etag).read_bytes()

    def write(self, index: Index, new_bodies: Mapping[str, bytes]) -> None:
        """The bodies first, then the index that names them, then the bodies no object has any more: a crash at
        any point leaves an index whose every body is on disk."""
        self.bodies.mkdir(exist_ok=True)
        on_disk = self.on_disk()
        for etag, body in new_bodies.items():
            if etag not in on_disk:
                write_whole(self.bodies / etag, body)
                on_disk.add(etag)
        write_json(self.index, {"format": INDEX_FORMAT, "buckets": index})
        named = {etag for objects in index.values() for etag in objects.values()}
        for unnamed in on_disk - named:
            (self.bodies / unnamed).unlink(missing_ok=True)
        self._on_disk = on_disk & named
