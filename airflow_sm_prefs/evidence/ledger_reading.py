"""Reading the capacity ledger: every readable entry, each judged on read (a bad one is counted and skipped), from a
local folder walked file by file or from object storage listed once with only what changed fetched; and the memo a
long-lived reader (the Capacity page) or the CLI between runs (``ledger_cache``) keeps of what it read.

Where the ledger lives and how it is written: ``ledger``. An entry's fields and judgement: ``ledger_entry``.
"""

from __future__ import annotations

import os
import threading
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
    compacted_paths,
    dag_folders,
    is_job_object,
    is_ledger_file,
    job_file_name,
    job_identity,
    job_paths,
    location,
    safe_name,
)
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry, why_unusable
from airflow_sm_prefs.facts import failure_cause
from airflow_sm_prefs.storage import object_storage, untrusted_files


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
        return _read_listed(root, dag_id, dags, keep, memo if memo is not None else ReadingMemo(), memo is not None)
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    signature: list[Any] = []
    shared: dict[Any, Any] = {}  # one copy of each list, Region and DAG id: 100,000 jobs share a handful
    for folder in dag_folders(root, dag_id, dags, bad):
        part = memo.folder(folder, keep) if memo is not None else _read_folder(folder, keep, shared)
        by_job.update(part.by_job)
        bad.extend(part.bad)
        signature.append((folder.name, part.signature))
    entries = [e for e in by_job.values() if dags is None or e["dag_id"] in dags]
    return Reading(entries, len(bad), bad[:5], tuple(signature) if memo is not None else None)


@dataclass(frozen=True)
class _FolderReading:
    by_job: dict[JobKey, LedgerEntry]
    bad: list[str]
    signature: Any  # what the folder's files were when read, None where unknown


@dataclass(frozen=True)
class FileReading:
    """What one file (a job's, or a compacted month) adds to its folder's reading."""

    entries: list[tuple[JobKey, LedgerEntry]]
    bad: list[str]


def _judged(keep: tuple[str, ...]) -> frozenset[str] | None:
    return None if set(keep) == set(LedgerEntry.__annotations__) else frozenset(keep)


def _file_reading(
    folder_name: str, file_name: str, body: bytes, keep: tuple[str, ...], shared: dict[Any, Any]
) -> FileReading:
    """The entries of one file's bytes: a month's lines (``.jsonl``) or a job's object. ``shared``: one copy of
    each list, Region and DAG id across files and readings."""
    judged = _judged(keep)
    entries: list[tuple[JobKey, LedgerEntry]] = []
    bad: list[str] = []

    def take(raw: Any, where: str, own_file: str | None) -> None:
        problem = why_unusable(raw, judged) or why_misplaced(raw, folder_name, own_file)
        if problem is not None:
            bad.append(f"{where}: {problem}")
            return
        kept = {key: raw.get(key) for key in keep}
        if "failure_cause" in kept and kept["failure_cause"] is None:
            kept["failure_cause"] = failure_cause.of_entry(raw)  # an older entry: its reason says it
        if "preferences" in kept:
            listed = kept["preferences"]
            # repr, not json.dumps: written with sorted keys, equal lists print alike, and repr is cheaper.
            kept["preferences"] = shared.setdefault(("preferences", repr(listed)), listed)
        for key in ("region", "dag_id", "task_id", "job_kind", "outcome", "selected_instance_type", "cost_basis"):
            if isinstance(kept.get(key), str):
                kept[key] = shared.setdefault(kept[key], kept[key])
        entries.append(((folder_name, *job_identity(raw)), kept))  # type: ignore[arg-type]

    if file_name.endswith(".jsonl"):
        for number, line in enumerate(body.splitlines(), start=1):
            where = f"{file_name} line {number}"
            try:
                raw = untrusted_files.load_json(line, where)
            except untrusted_files.UntrustedFileError as error:
                bad.append(str(error))
                continue
            take(raw, where, None)
    else:
        try:
            raw = untrusted_files.load_json(body, file_name)
        except untrusted_files.UntrustedFileError as error:
            return FileReading([], [str(error)])
        take(raw, file_name, file_name)
    return FileReading(entries, bad)


def _folder_of(files: list[FileReading], signature: Any) -> _FolderReading:
    """One folder's reading from its files' in order: compacted months first, so a job's own file replaces its
    compacted line."""
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    for part in files:
        by_job.update(part.entries)
        bad.extend(part.bad)
    return _FolderReading(by_job, bad, signature)


def _read_folder(folder: Any, keep: tuple[str, ...], shared: dict[Any, Any], signature: Any = None) -> _FolderReading:
    """One local DAG folder's entries. ``signature``: what a memo saw of the folder's files just before reading
    them (None without a memo)."""
    try:
        jobs = list(job_paths(folder))
    except OSError as error:  # a folder that cannot be listed costs its own entries, not the report
        return _FolderReading({}, [f"{folder.name}/: cannot be listed ({_why(error)})"], None)
    files: list[FileReading] = []
    try:
        months = list(compacted_paths(folder))
    except OSError as error:  # a stray file where the months should be costs the months, not the DAG's jobs
        months = []
        files.append(FileReading([], [f"{folder.name}/{COMPACTED}/: cannot be listed ({_why(error)})"]))
    for path, limit in [(month, MAX_MONTH_BYTES) for month in months] + [(job, MAX_ENTRY_BYTES) for job in jobs]:
        try:
            body = untrusted_files.read_bytes(path, limit)
        except untrusted_files.UntrustedFileError as error:
            files.append(FileReading([], [str(error).replace(str(path), path.name)]))
            continue
        files.append(_file_reading(folder.name, path.name, body, keep, shared))
    return _folder_of(files, signature)


# -- the ledger on object storage: listed, and only what changed fetched ----------------------------------------


def _read_listed(
    root: Any, dag_id: str | None, dags: Collection[str] | None, keep: tuple[str, ...], memo: ReadingMemo, kept: bool
) -> Reading:
    """``read`` on object storage: one listing of the ledger (or of the one DAG's folder); each object the memo
    holds at the ETag listed is taken from it, the others fetched concurrently. ``kept``: the memo is the
    caller's, so the reading carries a signature (each folder's keys and ETags)."""
    from airflow_sm_prefs.storage import object_listing

    try:
        if dag_id is not None:
            folder = safe_name(dag_id)
            listed = [
                object_listing.Listed(f"{folder}/{item.key}", item.version, item.size)
                for item in object_listing.listing(root / folder)
            ]
        else:
            listed = object_listing.listing(root)
    except FileNotFoundError:  # no ledger yet; any other failure is the store's, said by the caller
        listed = []
    wanted = None if dags is None else {safe_name(dag) for dag in dags}
    by_folder: dict[str, list[object_listing.Listed]] = {}
    for item in listed:
        folder_name, _, rest = item.key.partition("/")
        if rest and (wanted is None or folder_name in wanted):
            by_folder.setdefault(folder_name, []).append(item)
    held = memo.objects(str(root), keep)
    files: dict[str, FileReading] = {}
    to_fetch: list[object_listing.Listed] = []
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
            files[item.key] = _file_reading(folder_name, rest.rpartition("/")[2], body, keep, memo.shared)
        fresh[item.key] = (item.version, files[item.key])
    memo.hold(str(root), keep, fresh, set(files), {safe_name(dag_id)} if dag_id is not None else wanted)
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    signature = []
    for folder_name, items in sorted(by_folder.items()):
        # Months first, in order, then jobs' own objects: the order a local folder is read in.
        ordered = sorted((item for item in items if item.key in files), key=_months_first)
        part = _folder_of([files[item.key] for item in ordered], _listed_signature(items))
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


def _why(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def why_misplaced(raw: Any, folder_name: str, file_name: str | None) -> str | None:
    """Why an entry does not belong where it lies: its DAG's folder is not this one, or (a job's own file) its
    name is not the job's. Such an entry would add a run to another DAG or replace another job's entry."""
    if safe_name(raw["dag_id"]) != folder_name:
        return f"its dag_id {raw['dag_id']!r:.80} is not this folder's DAG ({folder_name:.80})"
    if file_name is not None and file_name not in (job_file_name(raw), f"{safe_name(raw['job_name'])}.json"):
        job, region = f"{raw['job_name']!r:.80}", f"{raw.get('region')!r:.40}"
        return f"its job_name and region ({job}, {region}) are not the file's ({file_name:.80})"
    return None


def _folder_signature(folder: Any) -> Any:
    """Every file of a local DAG folder (and of its compacted months) with its size, change time and inode: a
    write through ``replace_file`` or an edit in place changes it. None on object storage (no cheap listing with
    times), so a memo never trusts a remote folder."""
    if not object_storage.on_local_disk(folder):
        return None
    local = os.fspath(getattr(folder, "path", folder))
    found = []
    try:
        for place in (local, os.path.join(local, COMPACTED)):
            if not os.path.isdir(place):
                continue
            with os.scandir(place) as listing:
                for item in listing:
                    facts = item.stat(follow_symlinks=True) if item.is_file() else None
                    found.append((place, item.name, facts and (facts.st_size, facts.st_mtime_ns, facts.st_ino)))
    except OSError:
        return None
    return tuple(sorted(found, key=lambda item: (item[0], item[1])))


class ReadingMemo:
    """What readings kept, for a long-lived reader (the API server's Capacity page) or for the CLI between runs
    (``ledger_cache``): a local folder whose files are as they were is not read again; on object storage, an
    object whose listed ETag is the one it was read at is not fetched again."""

    def __init__(self) -> None:
        self._folders: dict[tuple[str, tuple[str, ...]], _FolderReading] = {}
        # (root, kept fields) -> object key below the root -> (ETag, what the object added)
        self._objects: dict[tuple[str, tuple[str, ...]], dict[str, tuple[str, FileReading]]] = {}
        self.shared: dict[Any, Any] = {}
        self.changed = False  # whether a reading took or dropped an object since the memo was made
        self._lock = threading.Lock()

    def folder(self, folder: Any, keep: tuple[str, ...]) -> _FolderReading:
        key = (str(folder), keep)
        with self._lock:
            kept = self._folders.get(key)
        # Taken before the files are read: a file changed meanwhile makes the next request read again.
        signature = _folder_signature(folder)
        if kept is not None and kept.signature is not None and kept.signature == signature:
            return kept
        part = _read_folder(folder, keep, self.shared, signature)
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
