"""Folding the ledger's old job entries into one object per DAG and month, by hand (``ledger compact``) or as part
of reading it (``compact_if_due``).

A ledger of a hundred thousand jobs is a hundred thousand objects; folded, it is a few per DAG and month, which a
reader lists and fetches in a few requests. On object storage the fold is safe beside the tasks that keep
writing: a month object is written only if it is still the one read (``If-Match``, or ``If-None-Match`` for a
new one), and a job's own object is deleted only if it is still the version folded, so an entry written again
meanwhile (a retry's record, a backfill) stays, and wins over its compacted line until the next fold. One lease
object (``.compaction-lease`` at the ledger's root, taken with a conditional write) keeps two hosts from folding
at once (``compaction_lease``). On a local folder the same holds
with files: the lease is created only if none is there, and a job's file is moved aside (one atomic rename)
and put back if it is not the entry folded.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.evidence import compaction_lease, ledger, ledger_entry, ledger_files, ledger_reading
from airflow_sm_prefs.storage import object_storage, untrusted_files

log = logging.getLogger(__name__)

# Old job objects, across the ledger, past which a reader folds them: [sm_prefs] ledger_compact_after.
DEFAULT_COMPACT_AFTER = 1_000
MONTH_ATTEMPTS = 3  # a month object another writer replaced meanwhile is read and merged again
MONTHS_AT_ONCE = 16


@dataclass
class Compaction:
    folded: int = 0  # entries moved into month files
    kept: int = 0  # entries too recent, unreadable, or written again meanwhile: left in their own file
    files: int = 0  # month files written
    busy: str | None = None  # who holds the lease, when another compaction is running


def compact(
    root: Any = None, older_than: dt.timedelta = ledger.FOLDABLE_AFTER, now: dt.datetime | None = None
) -> Compaction:
    """Fold the entries recorded more than ``older_than`` ago into their DAG's month files.

    One compaction at a time, on every store: a compaction that finds the lease held folds nothing (``busy``). A
    job's own file is removed only if it still holds the entry folded, so an entry written meanwhile stays."""
    root = root if root is not None else ledger.location()
    cutoff = (now or dt.datetime.now(dt.UTC)) - older_than
    if object_storage.on_local_disk(root):
        if not root.exists():
            return Compaction()
        if not root.is_dir():
            raise ledger.LedgerError(f"the ledger root {root} is a file, not a folder")
    with compaction_lease.Lease(root) as held:
        if not held:
            log.info("%s holds the ledger's compaction lease; not compacting now", held.holder)
            return Compaction(busy=held.holder)
        return _compact_walked(root, cutoff) if object_storage.on_local_disk(root) else _compact_listed(root, cutoff)


def compact_if_due(root: Any, reading: ledger_reading.Reading) -> Compaction | None:
    """Fold the ledger when ``reading`` found more job objects older than ``ledger.FOLDABLE_AFTER`` than
    ``[sm_prefs] ledger_compact_after`` (0: never); None when not due. For readers of object storage: the folding
    costs one reader once, and every later reading lists and fetches a few objects per month instead."""
    threshold = compact_after()
    if threshold == 0 or reading.old_job_objects is None or reading.old_job_objects < threshold:
        return None
    result = compact(root)
    log.info("Compacted the capacity ledger: %d entries folded into %d month objects", result.folded, result.files)
    return result


def compact_after() -> int:
    configured = object_storage.setting("ledger_compact_after")
    if configured is None:
        return DEFAULT_COMPACT_AFTER
    if not configured.isdigit():
        raise object_storage.StorageSettingError(
            f"[{object_storage.SECTION}] ledger_compact_after = {configured!r:.40}: a whole number of job objects "
            "(0 never compacts while reading)"
        )
    return int(configured)


# -- on object storage: listed, fetched many at a time, written and deleted on conditions ------------------------


def _compact_listed(root: Any, cutoff: dt.datetime) -> Compaction:
    from airflow_sm_prefs.storage import object_listing

    result = Compaction()
    jobs = {item.key: item for item in object_listing.listing(root) if ledger.is_job_object(item.key)}
    small = [key for key, item in jobs.items() if item.size <= ledger.MAX_ENTRY_BYTES]
    result.kept += len(jobs) - len(small)
    bodies = object_listing.fetch_many(root, small)
    by_month: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
    for key in small:
        raw = _foldable(bodies.get(key), key, cutoff)
        if raw is None:
            result.kept += bodies.get(key) is not None
            continue
        month = (raw.get("created_at") or raw["recorded_at"])[:7]
        by_month.setdefault((key.partition("/")[0], month), []).append((key, raw))

    def fold(folder: str, month: str, moved: list[tuple[str, dict[str, Any]]]) -> Compaction:
        """One DAG's month: its object merged, then its jobs' own objects deleted."""
        target = root / folder / ledger.COMPACTED / f"{month}.jsonl"
        if not _merge_into_month(target, [raw for _, raw in moved]):
            return Compaction(kept=len(moved))
        deleted = object_listing.delete_unchanged(root, {key: jobs[key].version for key, _ in moved})
        # Written again since: its own object stays, and wins over its compacted line.
        return Compaction(folded=len(deleted), kept=len(moved) - len(deleted), files=1)

    # Months are independent objects: a year of fifty DAGs is 600 of them, each a few round trips.
    with ThreadPoolExecutor(max_workers=MONTHS_AT_ONCE, thread_name_prefix="sm-prefs-fold") as pool:
        folds = [pool.submit(fold, folder, month, moved) for (folder, month), moved in sorted(by_month.items())]
        for done in folds:
            month = done.result()
            result.folded, result.kept, result.files = (
                result.folded + month.folded,
                result.kept + month.kept,
                result.files + month.files,
            )
    return result


def _foldable(body: bytes | None, key: str, cutoff: dt.datetime) -> dict[str, Any] | None:
    if body is None:
        return None
    try:
        raw = untrusted_files.load_json(body, key)
    except untrusted_files.UntrustedFileError:
        return None
    recorded: Any = raw.get("recorded_at") if isinstance(raw, dict) else None
    folder, _, name = key.partition("/")
    if ledger_entry.why_unusable(raw) is not None or ledger_files.why_misplaced(raw, folder, name) is not None:
        return None
    if not ledger_entry.is_time(recorded) or dt.datetime.fromisoformat(recorded) > cutoff:
        return None
    return raw  # type: ignore[no-any-return]


def _merge_into_month(target: Any, moved: list[dict[str, Any]]) -> bool:
    """Add ``moved`` to the month object, written only over the version read; False when it cannot be."""
    for _ in range(MONTH_ATTEMPTS):
        version = object_storage.current_version(target)
        existing = b""
        if version is not None:
            try:
                existing = untrusted_files.read_bytes(target, ledger.MAX_MONTH_BYTES)
            except untrusted_files.UntrustedFileError as error:  # left as it is, and its entries with it
                log.warning("Not compacting into %s: %s", target, error)
                return False
        try:
            object_storage.write_if_unchanged(target, _merged(existing, moved, target), version)
        except object_storage.ChangedMeanwhile:
            continue
        return True
    log.warning("Not compacting into %s: another writer replaced it each of %d times", target, MONTH_ATTEMPTS)
    return False


def _merged(existing: bytes, moved: list[dict[str, Any]], where: Any) -> bytes:
    """The month's lines by job, the moved entries over the old lines of the same jobs; lines that are not
    entries are kept as they are (the reader counts them as bad)."""
    lines: dict[tuple[str | None, str], bytes] = {}
    for line in existing.splitlines():
        try:
            lines[ledger.job_identity(untrusted_files.load_json(line, where))] = line
        except (untrusted_files.UntrustedFileError, KeyError, TypeError, AttributeError):
            lines[("?", str(len(lines)))] = line
    for raw in moved:
        lines[ledger.job_identity(raw)] = json.dumps(raw, sort_keys=True).encode()
    return b"\n".join(lines.values()) + b"\n"


# -- on a local folder: walked ------------------------------------------------------------------------------------


def _compact_walked(root: Any, cutoff: dt.datetime) -> Compaction:
    result = Compaction()
    for folder in ledger.dag_folders(root, None):
        by_month: dict[str, list[tuple[Any, dict[str, Any], bytes]]] = {}
        for path in ledger.job_paths(folder):
            try:
                body = untrusted_files.read_bytes(path, ledger.MAX_ENTRY_BYTES)
                raw = untrusted_files.load_json(body, path)
            except untrusted_files.UntrustedFileError:
                result.kept += 1
                continue
            recorded: Any = raw.get("recorded_at") if isinstance(raw, dict) else None
            if ledger_entry.why_unusable(raw) is not None or not ledger_entry.is_time(recorded):
                result.kept += 1
                continue
            if dt.datetime.fromisoformat(recorded) > cutoff:
                result.kept += 1
                continue
            month = (raw.get("created_at") or recorded)[:7]
            by_month.setdefault(month, []).append((path, raw, body))
        for month, moved in sorted(by_month.items()):
            target = folder / ledger.COMPACTED / f"{month}.jsonl"
            existing = b""
            if target.exists():
                try:
                    existing = untrusted_files.read_bytes(target, ledger.MAX_MONTH_BYTES)
                except untrusted_files.UntrustedFileError as error:  # left as it is, and its entries with it
                    log.warning("Not compacting into %s: %s", target, error)
                    result.kept += len(moved)
                    continue
            ledger.replace_file(target, _merged(existing, [raw for _, raw, _ in moved], target))
            result.files += 1
            for path, _, body in moved:
                if compaction_lease.removed_if_unchanged(os.fspath(getattr(path, "path", path)), body):
                    result.folded += 1
                else:
                    result.kept += 1
    return result
