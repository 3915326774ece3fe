"""Reading the capacity ledger: every readable entry, each judged on read (a bad one is counted and skipped), from a
local folder walked file by file or from object storage listed once with only what changed fetched; and the memo a
long-lived reader (the Capacity page) or the CLI between runs (``ledger_cache``) keeps of what it read.

Where the ledger lives and how it is written: ``ledger``. An entry's fields and judgement: ``ledger_entry``.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.evidence.ledger import (
    COMPACTED,
    FOLDABLE_AFTER,
    MAX_ENTRY_BYTES,
    MAX_MONTH_BYTES,
    JobKey,
    dag_folders,
    is_job_object,
    is_ledger_file,
    location,
    safe_name,
)
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry
from airflow_sm_prefs.evidence.ledger_files import FileReading, file_reading, folder_of, read_folder
from airflow_sm_prefs.evidence.reading_memo import ReadingMemo
from airflow_sm_prefs.storage import object_storage


@dataclass
class Reading:
    entries: list[LedgerEntry]
    bad: int  # unreadable, truncated or misshapen entries, counted and skipped
    bad_examples: list[str]
    # With a memo: what the folders read were like (equal signatures, equal readings); else None.
    signature: Any = None
    # On object storage: jobs' own objects the store last wrote more than FOLDABLE_AFTER ago (what compaction
    # would fold); None on a local folder, which is read fast enough as it is.
    old_job_objects: int | None = None


def read(
    root: Any = None,
    *,
    dag_id: str | None = None,
    dags: Collection[str] | None = None,
    fields: tuple[str, ...] | None = None,
    memo: ReadingMemo | None = None,
) -> Reading:
    """Every readable entry (of one DAG, or of the DAGs in ``dags``, if given), compacted or not; bad ones are
    counted, never fatal. ``fields``: keep only these keys of each entry (``REPORT_FIELDS`` for a report).
    ``memo``: what an earlier reading kept, read again only where a file changed.

    A local folder is walked; object storage is listed once and only the objects the memo does not hold at
    their listed ETag are fetched, many at a time (``object_listing``)."""
    root = root if root is not None else location()
    keep = fields or tuple(LedgerEntry.__annotations__)
    if not object_storage.on_local_disk(root):
        return _read_listed(
            root,
            dag_id=dag_id,
            dags=dags,
            keep=keep,
            memo=memo if memo is not None else ReadingMemo(),
            kept=memo is not None,
        )
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    signature: list[Any] = []
    shared: dict[Any, Any] = {}  # one copy of each list, Region and DAG id: 100,000 jobs share a handful
    for folder in dag_folders(root, dag_id, dags, bad):
        part = memo.folder(folder, keep) if memo is not None else read_folder(folder, keep, shared)
        by_job.update(part.by_job)
        bad.extend(part.bad)
        signature.append((folder.name, part.signature))
    entries = [e for e in by_job.values() if dags is None or e["dag_id"] in dags]
    return Reading(entries, len(bad), bad[:5], tuple(signature) if memo is not None else None)


# -- the ledger on object storage: listed, and only what changed fetched ----------------------------------------


def _read_listed(
    root: Any,
    *,
    dag_id: str | None,
    dags: Collection[str] | None,
    keep: tuple[str, ...],
    memo: ReadingMemo,
    kept: bool,
) -> Reading:
    """``read`` on object storage: one listing of the ledger (or of the one DAG's folder); each object the memo
    holds at the ETag listed is taken from it, the others fetched concurrently. ``kept``: the memo is the
    caller's, so the reading carries a signature (each folder's keys and ETags)."""
    from airflow_sm_prefs.storage import object_listing

    try:
        if dag_id is not None:
            folder = safe_name(dag_id)
            listed = [
                object_listing.ListedObject(f"{folder}/{item.key}", item.version, item.size)
                for item in object_listing.listing(root / folder)
            ]
        else:
            listed = object_listing.listing(root)
    except FileNotFoundError:  # no ledger yet; any other failure is the store's, said by the caller
        listed = []
    wanted = None if dags is None else {safe_name(dag) for dag in dags}
    by_folder: dict[str, list[object_listing.ListedObject]] = {}
    for item in listed:
        folder_name, _, rest = item.key.partition("/")
        if rest and (wanted is None or folder_name in wanted):
            by_folder.setdefault(folder_name, []).append(item)
    held = memo.objects(str(root), keep)
    files: dict[str, FileReading] = {}
    to_fetch: list[object_listing.ListedObject] = []
    for folder_name, items in by_folder.items():
        for item in items:
            rest = item.key[len(folder_name) + 1 :]
            if rest == COMPACTED:  # an object where the folder of months should be: it costs only itself
                files[item.key] = FileReading([], [f"{folder_name}/{COMPACTED}: an object where a folder should be"])
            elif is_ledger_file(rest):
                known = held.get(item.key)
                limit = _size_limit(item.key)
                if known is not None and known[0] == item.version:
                    files[item.key] = known[1]
                elif item.size > limit:
                    files[item.key] = FileReading([], [f"{rest}: {item.size} bytes, more than the {limit} allowed"])
                else:
                    to_fetch.append(item)
    bodies = object_listing.fetch_many(root, [item.key for item in to_fetch])
    fresh: dict[str, tuple[str, FileReading]] = {}
    for item in to_fetch:
        body = bodies[item.key]
        if body is None:  # removed since the listing (compacted meanwhile): the next reading sees its month
            continue
        folder_name, _, rest = item.key.partition("/")
        limit = _size_limit(item.key)
        if len(body) > limit:
            files[item.key] = FileReading([], [f"{rest}: more than the {limit} bytes allowed"])
        else:
            files[item.key] = file_reading(folder_name, rest.rpartition("/")[2], body, keep=keep, shared=memo.shared)
        fresh[item.key] = (item.version, files[item.key])
    memo.hold(
        str(root), keep, fresh=fresh, listed=set(files), folders={safe_name(dag_id)} if dag_id is not None else wanted
    )
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    signature = []
    for folder_name, items in sorted(by_folder.items()):
        # Months first, in order, then jobs' own objects: the order a local folder is read in.
        ordered = sorted((item for item in items if item.key in files), key=_months_first)
        part = folder_of([files[item.key] for item in ordered], _listed_signature(items))
        by_job.update(part.by_job)
        bad.extend(part.bad)
        signature.append((folder_name, part.signature))
    entries = [e for e in by_job.values() if dags is None or e["dag_id"] in dags]
    written_before = time.time() - FOLDABLE_AFTER.total_seconds()
    old = sum(
        1
        for items in by_folder.values()
        for item in items
        if item.modified is not None and item.modified < written_before and is_job_object(item.key)
    )
    return Reading(entries, len(bad), bad[:5], tuple(signature) if kept else None, old)


def _months_first(item: Any) -> tuple[bool, str]:
    return (is_job_object(item.key), item.key)


def _size_limit(key: str) -> int:
    return MAX_ENTRY_BYTES if is_job_object(key) else MAX_MONTH_BYTES


def _listed_signature(items: list[Any]) -> str:
    """A folder's keys and ETags as one short value: equal when no object was added, replaced or removed."""
    import hashlib

    digest = hashlib.sha256()
    for item in sorted(items, key=lambda item: item.key):
        digest.update(f"{item.key}\0{item.version}\n".encode())
    return digest.hexdigest()
