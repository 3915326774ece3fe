"""The capacity ledger: every job's end, kept outside Airflow's metadata database.

One JSON object per job, at ``<ledger>/<dag_id>/<job name>.<region>.json``, through Airflow's ``ObjectStoragePath``:
a local folder by default (``$AIRFLOW_HOME/sm_prefs/ledger``, what ``make demo``, ``airflow standalone`` and
``airflow dags test`` share with no configuration), or one shared location for every host, set in
``[sm_prefs] ledger_path`` (``AIRFLOW__SM_PREFS__LEDGER_PATH``), e.g. ``s3://team-bucket/sm-prefs-ledger``
with ``[sm_prefs] ledger_conn_id`` naming its connection. A job's entry is named by the job and its Region
(SageMaker's names are unique per account and Region), so writing it again (a retry's record, a backfill)
replaces it and nothing is counted twice; and it lives outside the database, so task clears and ``airflow db
clean`` leave it alone.

Writing never decides a task's outcome: a ledger that cannot be written logs a warning and the task goes on.

Compaction (``ledger_compaction``) folds the entries older than a day into one JSON-lines file per DAG and month
(``<ledger>/<dag_id>/compacted/<YYYY-MM>.jsonl``), so a report over years of nightly runs reads hundreds of
files, not a hundred thousand. A job's own file, if one is written again later (a backfill), wins over its
compacted line.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry, why_unusable
from airflow_sm_prefs.facts import failure_cause
from airflow_sm_prefs.storage import object_storage, paths, untrusted_files

log = logging.getLogger(__name__)

CONFIG_SECTION = "sm_prefs"
COMPACTED = "compacted"
# -- where it lives ----------------------------------------------------------------------------------------------


def location() -> Any:
    """The ledger's root, an ``ObjectStoragePath``: ``[sm_prefs] ledger_path``, else ``<[sm_prefs] storage>/ledger``,
    else local; ``object_storage.StorageUnavailable`` when its filesystem is not installed."""
    root = object_storage.shared_file("ledger_path", "ledger", conn_option="ledger_conn_id")
    if isinstance(root, Path):  # one API for both: readers and compaction walk it as object storage
        return object_storage.open_root(f"file://{root.absolute()}", None, f"[{CONFIG_SECTION}] ledger_path")
    return root


def _safe(name: str) -> str:
    """A file or folder name that stays inside its folder and is one name's alone: letters, digits, ``-`` and
    ``_`` as they are, a dot as it is except at the start (``.`` and ``..`` are valid DAG ids), anything else
    as ``%XX``. Names made only of those characters (every SageMaker job name) keep their old file."""
    safe = []
    for index, character in enumerate(name):
        if character.isalnum() or character in "-_" or (character == "." and index):
            safe.append(character)
        else:
            safe.append("".join(f"%{byte:02X}" for byte in character.encode("utf-8")))
    return "".join(safe) or "%"


def write(entry: LedgerEntry, root: Any = None) -> bool:
    """Add or replace the job's entry; a warning (never an exception) when the ledger cannot be written.

    ``root``: an ``ObjectStoragePath`` or a local ``pathlib.Path`` (default: ``location()``). Bounded by
    ``[sm_prefs] storage_timeout``: a store that does not answer costs the task no more than that. An entry a
    shared store refused is kept on this host (``spool_folder()``) and sent with the next entry this host
    writes; True when the entry reached the ledger."""
    from airflow_sm_prefs.storage import bounded

    target: list[Any] = []

    def put() -> None:
        target.append(root if root is not None else location())
        _put(entry, target[0])

    try:
        bounded.within(f"the capacity ledger's entry for {entry.get('job_name')}", put)
    except Exception as error:
        kept = _spooled(entry) if not target or not object_storage.on_local_disk(target[0]) else False
        log.warning(
            "Could not record SageMaker job %s in the capacity ledger: %s%s",
            entry.get("job_name"),
            error,
            f"; kept on this host in {spool_folder()} until an entry from this host reaches the ledger" if kept else "",
        )
        return False
    send_kept(target[0])
    return True


def job_file_name(entry: LedgerEntry | dict[str, Any]) -> str:
    """A job's own object in its DAG's folder: ``<job name>.<region>.json``. SageMaker's names are unique per
    account and Region only, so one DAG's two jobs of one name in two Regions keep two objects. An entry with
    no Region (and every entry written before the Region was in the name) is ``<job name>.json``."""
    region = entry.get("region")
    if isinstance(region, str) and region:
        return f"{_safe(entry['job_name'])}.{_safe(region)}.json"
    return f"{_safe(entry['job_name'])}.json"


_REGIONAL_FILE = re.compile(r"(?P<name>.+)\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)\.json")


def job_of_file_name(file_name: str) -> tuple[str | None, str]:
    """``job_file_name`` read back: (Region, job name) of a job's own object; no Region in the older form."""
    regional = _REGIONAL_FILE.fullmatch(file_name)
    if regional:
        return urllib.parse.unquote(regional["region"]), urllib.parse.unquote(regional["name"])
    return None, urllib.parse.unquote(file_name.removesuffix(".json"))


def _put(entry: LedgerEntry | dict[str, Any], root: Any) -> None:
    folder = root / _safe(entry["dag_id"])
    object_storage.make_folder(folder)
    replace_file(folder / job_file_name(entry), json.dumps(entry, sort_keys=True))


# -- entries a shared store refused, kept on the host that wrote them -------------------------------------------
# Read by this host alone (it sends them), so a local folder breaks no rule of the shared store; one file per
# job, so an entry kept twice is kept once.
MAX_SPOOLED = 1_000  # a store down for days on a busy host: entries past this are left to `ledger backfill`


def spool_folder() -> Path:
    return Path(paths.default_file("ledger-spool"))


def _spooled(entry: LedgerEntry) -> bool:
    try:
        folder = spool_folder() / _safe(entry["dag_id"])
        if sum(1 for _ in spool_folder().glob("*/*.json")) >= MAX_SPOOLED:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(folder / job_file_name(entry), json.dumps(entry, sort_keys=True))
        return True
    except OSError as error:
        log.warning("Could not keep SageMaker job %s's ledger entry on this host: %s", entry.get("job_name"), error)
        return False


def send_kept(root: Any) -> int:
    """Send what this host kept while the store failed, within one more deadline; what is left stays kept.
    The number sent (an unreadable kept file counts: it is dropped, never sent again)."""
    from airflow_sm_prefs.storage import bounded

    kept = sorted(spool_folder().glob("*/*.json")) if spool_folder().is_dir() else []
    if not kept:
        return 0
    sent: list[Path] = []

    def send() -> None:
        for path in kept:
            if path.is_dir() and not path.is_symlink():
                continue  # not a kept entry (none is a folder): it costs itself, never the entries after it
            try:
                raw = untrusted_files.load_json(untrusted_files.read_bytes(path, MAX_ENTRY_BYTES), path.name)
            except untrusted_files.UntrustedFileError:
                raw = None
            if raw is not None and why_unusable(raw) is None and not _stored_is_newer(raw, root):
                _put(raw, root)
            path.unlink(missing_ok=True)  # sent, superseded, or not an entry: never sent again
            sent.append(path)

    try:
        bounded.within(f"{len(kept)} ledger entries kept on this host", send)
    except Exception as error:
        log.warning("Could not send %d kept ledger entries yet: %s", len(kept) - len(sent), error)
    else:
        log.info("Sent %d ledger entries this host kept while the store failed", len(sent))
    return len(sent)


def _stored_is_newer(kept: dict[str, Any], root: Any) -> bool:
    """Whether the store already holds a better entry of this job than the kept one: a task's own entry beats
    one ``ledger backfill`` rebuilt from the job's tags (it holds what only the task knew), and between two of a
    kind the one recorded later wins (a retry on another host recorded the job's end while this host kept an
    older state)."""
    target = root / _safe(kept["dag_id"]) / job_file_name(kept)
    try:
        stored = untrusted_files.load_json(untrusted_files.read_bytes(target, MAX_ENTRY_BYTES), target.name)
    except (untrusted_files.UntrustedFileError, FileNotFoundError):
        return False
    if why_unusable(stored) is not None:
        return False  # what the store holds is no entry: the kept one replaces it
    return _standing(stored) >= _standing(kept)


def _standing(entry: Mapping[str, Any]) -> tuple[bool, dt.datetime]:
    return entry.get("source") != "backfill", _recorded(entry)


def _recorded(entry: Mapping[str, Any]) -> dt.datetime:
    """When the entry was recorded; the earliest time for one that does not say (it loses to any that does)."""
    value = entry.get("recorded_at")
    try:
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


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


FOLDABLE_AFTER = dt.timedelta(days=1)


MAX_ENTRY_BYTES = 1 << 20  # one job's entry: a few KB; the limit keeps /dev/zero and its kind out
MAX_MONTH_BYTES = 1 << 29  # a DAG's month of compacted entries: 100,000 jobs are about 100 MB


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


# What makes a job one job in the ledger: its DAG's folder, its Region and its name. SageMaker's names are unique
# per account and Region only, and the folder keeps one DAG's objects from replacing another's.
JobKey = tuple[str, str | None, str]


def job_identity(raw: Mapping[str, Any]) -> tuple[str | None, str]:
    """What tells one job of a DAG from another: its Region (None where an entry has none) and its name."""
    region = raw.get("region")
    return (region if isinstance(region, str) else None, str(raw["job_name"]))


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
        months = list(_compacted_paths(folder))
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
            folder = _safe(dag_id)
            listed = [
                object_listing.Listed(f"{folder}/{item.key}", item.version, item.size)
                for item in object_listing.listing(root / folder)
            ]
        else:
            listed = object_listing.listing(root)
    except FileNotFoundError:  # no ledger yet; any other failure is the store's, said by the caller
        listed = []
    wanted = None if dags is None else {_safe(dag) for dag in dags}
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
    memo.hold(str(root), keep, fresh, set(files), {_safe(dag_id)} if dag_id is not None else wanted)
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


def is_job_object(key: str) -> bool:
    """Whether a key below the ledger's root is one job's own object (``<dag>/<job>.json``), not a month."""
    folder, _, rest = key.partition("/")
    return bool(folder) and "/" not in rest and is_ledger_file(rest)


def _size_limit(key: str) -> int:
    return MAX_ENTRY_BYTES if is_job_object(key) else MAX_MONTH_BYTES


def is_ledger_file(rest: str) -> bool:
    """Whether a key below a DAG's folder is a job's object or a compacted month (a leading "." is temporary)."""
    parts = rest.split("/")
    if len(parts) == 1:
        return parts[0].endswith(".json") and not parts[0].startswith(".")
    return len(parts) == 2 and parts[0] == COMPACTED and parts[1].endswith(".jsonl") and not parts[1].startswith(".")


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
    if _safe(raw["dag_id"]) != folder_name:
        return f"its dag_id {raw['dag_id']!r:.80} is not this folder's DAG ({folder_name:.80})"
    if file_name is not None and file_name not in (job_file_name(raw), f"{_safe(raw['job_name'])}.json"):
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


def dag_folders(
    root: Any, dag_id: str | None, dags: Collection[str] | None = None, bad: list[str] | None = None
) -> Iterator[Any]:
    """The DAG folders to read; a root that is not a folder, or cannot be listed, is one bad entry in ``bad``
    (raised as ``LedgerError`` when no list is given)."""
    try:
        if not root.exists():
            return
        if not root.is_dir():
            raise NotADirectoryError(f"the ledger root {root} is a file, not a folder")
        if dag_id is not None:
            candidates = [root / _safe(dag_id)]
        elif dags is not None:
            candidates = [root / name for name in sorted({_safe(dag) for dag in dags})]
        else:
            candidates = [p for p in root.iterdir() if p.is_dir()]
    except OSError as error:
        if bad is None:
            raise LedgerError(str(error)) from error
        bad.append(str(error))
        return
    yield from (folder for folder in candidates if folder.exists())


class LedgerError(SageMakerPreferencesError, OSError):
    """The ledger's root cannot be used (a file, or a folder that cannot be listed)."""


def job_paths(folder: Any) -> Iterator[Any]:
    """A DAG folder's job objects in name order: a job's ``<name>.json`` from before the Region was in the name
    comes before its ``<name>.<region>.json``, which replaces it in a reading."""
    for path in sorted(folder.iterdir(), key=lambda path: path.name):
        if path.name.endswith(".json") and not path.name.startswith("."):  # a leading "." is a temporary file
            yield path


def _compacted_paths(folder: Any) -> Iterator[Any]:
    compacted = folder / COMPACTED
    if compacted.exists():
        if not compacted.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        yield from sorted(
            (p for p in compacted.iterdir() if p.name.endswith(".jsonl") and not p.name.startswith(".")),
            key=lambda p: p.name,
        )


def _entry_paths(root: Any, dag_id: str | None) -> Iterator[Any]:
    for folder in dag_folders(root, dag_id):
        yield from job_paths(folder)


def replace_file(target: Any, data: str | bytes) -> None:
    """Write a file whole: locally through a temporary file, so a reader never sees half of it; an object
    store's put is whole or nothing."""
    data = data.encode() if isinstance(data, str) else data
    object_storage.make_folder(target.parent)
    if object_storage.on_local_disk(target):
        # A name of its own per write (not per process): threads writing one job's entry at once each rename a
        # whole file of their own, and the last rename wins. Made with the process's umask, as the entry itself.
        temporary = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        temporary.write_bytes(data)
        os.replace(getattr(temporary, "path", temporary), getattr(target, "path", target))
    else:
        target.write_bytes(data)


class KnownJobs:
    """The jobs the ledger has an entry for, by name and Region (None: an object named before the Region was)."""

    def __init__(self) -> None:
        self._regions: dict[str, set[str | None]] = {}

    def add(self, name: str, region: str | None) -> None:
        self._regions.setdefault(name, set()).add(region)

    @property
    def names(self) -> set[str]:
        return set(self._regions)

    def has(self, name: str, region: str | None) -> bool:
        regions = self._regions.get(name, set())
        return bool(regions) and (region is None or None in regions or region in regions)


def known_jobs(root: Any = None) -> KnownJobs:
    """The jobs the ledger has an entry for, in their own file or compacted."""
    root = root if root is not None else location()
    known = KnownJobs()
    for path in _entry_paths(root, None):
        region, name = job_of_file_name(path.name)
        known.add(name, region)
    for folder in dag_folders(root, None):
        for path in _compacted_paths(folder):
            try:
                lines = untrusted_files.read_bytes(path, MAX_MONTH_BYTES).splitlines()
            except untrusted_files.UntrustedFileError:
                continue
            for line in lines:
                try:
                    region, name = job_identity(untrusted_files.load_json(line, path))
                    known.add(name, region)
                except (untrusted_files.UntrustedFileError, KeyError, TypeError, AttributeError):
                    continue
    return known
