"""Reading a file that anyone with write access to a folder may have put there: only a regular file, only up to
a size, JSON without NaN and not nested past the parser's stack, so one bad file costs what it feeds and never
hangs or exhausts a process.

A FIFO or a device opened for reading blocks or never ends; ``/dev/zero`` behind a symlink fills memory; JSON
nested 100,000 deep overflows the parser's stack. Locally the file is opened without blocking and judged by
the open descriptor (no window between the check and the read); on object storage, by its listing's size.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.storage.object_storage import on_local_disk


class UntrustedFileError(SageMakerPreferencesError, ValueError):
    """The file cannot be used: not a regular file, too large, not UTF-8, not JSON, or nested too deep."""


def read_bytes(path: Any, limit: int) -> bytes:
    """The file's bytes, if it is a regular file of at most ``limit`` bytes (``path``: a ``pathlib.Path`` or an
    ``ObjectStoragePath``)."""
    if on_local_disk(path):
        local = os.fspath(getattr(path, "path", path))
        try:
            descriptor = os.open(local, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as error:
            raise UntrustedFileError(f"{path}: cannot be opened ({error.strerror or error})") from None
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode) or found.st_size > limit:
            os.close(descriptor)
            if not stat.S_ISREG(found.st_mode):
                raise UntrustedFileError(f"{path}: not a regular file")
            raise UntrustedFileError(f"{path}: {found.st_size} bytes, more than the {limit} allowed")
        with os.fdopen(descriptor, "rb") as opened:
            data = opened.read(limit + 1)
    else:
        data = _read_object(path, limit)
    if len(data) > limit:
        raise UntrustedFileError(f"{path}: more than the {limit} bytes allowed")
    return bytes(data)


READ_ATTEMPTS = 3  # an object replaced while it is read is read again, whole


def _read_object(path: Any, limit: int) -> bytes:
    for _ in range(READ_ATTEMPTS):
        try:
            size = path.stat().st_size
        except (OSError, AttributeError) as error:
            raise UntrustedFileError(f"{path}: cannot be read ({error})") from None
        if size is not None and size > limit:
            raise UntrustedFileError(f"{path}: {size} bytes, more than the {limit} allowed")
        try:
            return bytes(path.read_bytes())
        except OSError as error:
            # s3fs's FileExpired (by name: s3fs is not installed everywhere): another host replaced the object
            # between its size and its read. Read again, so never half of each.
            if type(error).__name__ != "FileExpired":
                raise
    raise UntrustedFileError(f"{path}: replaced by another writer each of the {READ_ATTEMPTS} times it was read")


def decode(data: bytes, where: object) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UntrustedFileError(f"{where}: not UTF-8 (byte {error.start})") from None


def load_json(text: str | bytes, where: object) -> Any:
    """JSON text parsed; ``NaN`` and ``Infinity`` (which Python's parser takes, and no JSON reader should) and
    nesting too deep for the parser are refused like any other bad text."""
    if isinstance(text, bytes):
        text = decode(text, where)
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise UntrustedFileError(f"{where}: JSON nested too deep") from None
    except ValueError as error:
        constant = str(error) if str(error).endswith("is not a JSON number") else None
        raise UntrustedFileError(f"{where}: not JSON" + (f" ({constant})" if constant else "")) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: Any, limit: int) -> Any:
    return load_json(read_bytes(path, limit), path)


# One decoder for every call: json.loads with an argument builds a new one each time (100,000 ledger lines).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)
