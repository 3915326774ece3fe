"""The ledger's compaction lease, so one host folds at a time, and the local file removed only if unchanged.

One lease object (``.compaction-lease`` at the ledger's root) is taken with a conditional write (on a local
folder, a file created only if none is there) and given back by deleting it if it is still the one taken; a lease
its holder did not give back (a crashed host) lapses after ``LEASE_SECONDS``, and one this version did not write
is taken over.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import uuid
from typing import Any

from airflow_sm_prefs.evidence import ledger_entry
from airflow_sm_prefs.storage import object_storage, untrusted_files

log = logging.getLogger(__name__)

LEASE = ".compaction-lease"
LEASE_SECONDS = 15 * 60  # longer than folding a year of a team's jobs takes; a crashed holder blocks no longer


class Lease:
    """The ledger's compaction lease: taken with a conditional write (on a local folder, a file created only if
    none is there), given back by deleting it if it is still ours. ``bool(lease)``: whether this process holds
    it; ``holder``: who does."""

    def __init__(self, root: Any) -> None:
        self.path = root / LEASE
        self.root = root
        self.local = os.fspath(getattr(self.path, "path", self.path)) if object_storage.on_local_disk(root) else None
        self.version: str | bytes | None = None
        self.holder = ""

    def __enter__(self) -> Lease:
        now = dt.datetime.now(dt.UTC)
        holder = f"{socket.gethostname()}:{os.getpid()}"
        mine = json.dumps({"holder": holder, "until": _iso(now + dt.timedelta(seconds=LEASE_SECONDS))}).encode()
        current, current_version = self._current()
        held = _lease_in(current) if current is not None else None
        if held is not None and dt.datetime.fromisoformat(held["until"]) > now:
            self.holder = f"{held['holder']} until {held['until']}"
            return self
        if self._take(mine, current, current_version):  # none, or one that lapsed or is not a lease: taken over
            self.version, self.holder = (mine if self.local else object_storage.current_version(self.path)), holder
        else:
            self.holder = "another process, which took it at the same moment"
        return self

    def _current(self) -> tuple[bytes | None, str | None]:
        if self.local is not None:
            try:
                return untrusted_files.read_bytes(self.local, 4096), None
            except untrusted_files.UntrustedFileError:
                return (b"" if os.path.lexists(self.local) else None), None
        version = object_storage.current_version(self.path)
        if version is None:
            return None, None
        try:
            return untrusted_files.read_bytes(self.path, 4096), version
        except untrusted_files.UntrustedFileError:
            return b"", version

    def _take(self, mine: bytes, current: bytes | None, version: str | None) -> bool:
        if self.local is None:
            try:
                object_storage.write_if_unchanged(self.path, mine, version)
            except object_storage.ChangedMeanwhile:
                return False
            return True
        if current is not None and not removed_if_unchanged(self.local, current):
            return False
        try:
            with open(self.local, "xb") as stream:
                stream.write(mine)
        except FileExistsError:
            return False
        return True

    def __bool__(self) -> bool:
        return self.version is not None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self.version is None:
            return
        from airflow_sm_prefs.storage import object_listing

        try:
            if isinstance(self.version, bytes):  # a local lease: its own content is its version
                removed_if_unchanged(str(self.local), self.version)
            else:
                object_listing.delete_unchanged(self.root, {LEASE: str(self.version)})
        except OSError as error:  # it lapses by itself
            # After a fold that failed, its caller says why (a store that refused the fold's deletes refuses this
            # one too): a second warning would say the same thing worse.
            log.log(
                logging.INFO if kind is not None else logging.WARNING,
                "Could not give back the ledger's compaction lease (it lapses in %d s): %s",
                LEASE_SECONDS,
                error,
            )


def _lease_in(data: bytes) -> dict[str, str] | None:
    try:
        held = untrusted_files.load_json(data, LEASE)
    except untrusted_files.UntrustedFileError:
        return None
    if not (isinstance(held, dict) and isinstance(held.get("holder"), str) and ledger_entry.is_time(held.get("until"))):
        return None  # not a lease this version wrote: taken over
    return held


def _iso(when: dt.datetime) -> str:
    return when.isoformat(timespec="seconds")


def removed_if_unchanged(path: str, folded: bytes) -> bool:
    """Remove a job's file only if it still holds the entry folded. Moved aside first (one atomic rename), then
    judged: an entry written again meanwhile (a retry's record) is put back, unless an even newer one has
    already taken its place; either way the newest entry stays in its own file and wins over the fold."""
    aside = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{uuid.uuid4().hex}.folding"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    try:
        with open(aside, "rb") as stream:
            unchanged = stream.read() == folded
        if not unchanged:
            with contextlib.suppress(FileExistsError):  # a newer entry took the name meanwhile: it stays
                os.link(aside, path)
        return unchanged
    finally:
        os.unlink(aside)
