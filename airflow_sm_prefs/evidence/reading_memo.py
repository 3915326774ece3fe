"""What readings of the ledger kept, so a reader reads again only what changed.

A long-lived reader (the API server's Capacity page) keeps one in memory; the CLI keeps one between runs
(``ledger_cache``). A local folder whose files are as they were is not read again; on object storage, an object
whose listed ETag is the one it was read at is not fetched again. A memo never trusts a remote folder's state
without a listing.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow_sm_prefs.evidence.ledger_files import FileReading, FolderReading, folder_signature, read_folder


class ReadingMemo:
    """What readings kept, for a long-lived reader (the API server's Capacity page) or for the CLI between runs
    (``ledger_cache``): a local folder whose files are as they were is not read again; on object storage, an
    object whose listed ETag is the one it was read at is not fetched again."""

    def __init__(self) -> None:
        self._folders: dict[tuple[str, tuple[str, ...]], FolderReading] = {}
        # (root, kept fields) -> object key below the root -> (ETag, what the object added)
        self._objects: dict[tuple[str, tuple[str, ...]], dict[str, tuple[str, FileReading]]] = {}
        self.shared: dict[Any, Any] = {}
        self.changed = False  # whether a reading took or dropped an object since the memo was made
        self._lock = threading.Lock()

    def folder(self, folder: Any, keep: tuple[str, ...]) -> FolderReading:
        key = (str(folder), keep)
        with self._lock:
            kept = self._folders.get(key)
        # Taken before the files are read: a file changed meanwhile makes the next request read again.
        signature = folder_signature(folder)
        if kept is not None and kept.signature is not None and kept.signature == signature:
            return kept
        part = read_folder(folder, keep, self.shared, signature)
        with self._lock:
            self._folders[key] = part
        return part

    def objects(self, root: str, keep: tuple[str, ...]) -> dict[str, tuple[str, FileReading]]:
        """What is held of the objects under ``root`` (a copy: a reading in another thread may replace it)."""
        with self._lock:
            return dict(self._objects.get((root, keep), {}))

    def hold(
        self,
        root: str,
        keep: tuple[str, ...],
        *,
        fresh: dict[str, tuple[str, FileReading]],
        listed: set[str],
        folders: set[str] | None,
    ) -> None:
        """Take the objects just read; forget those no longer ``listed`` in the ``folders`` just listed (None:
        the whole ledger was), so what is held never outgrows the ledger."""
        with self._lock:
            held = self._objects.setdefault((root, keep), {})
            gone = [key for key in held if key not in listed and (folders is None or key.partition("/")[0] in folders)]
            for key in gone:
                del held[key]
            held.update(fresh)
            self.changed = self.changed or bool(gone or fresh)
