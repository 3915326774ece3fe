"""One ledger file's entries and one local DAG folder's: each entry judged on read (a bad one counted and
skipped, never fatal), kept to the fields asked for, in the order that lets a job's own file replace its
compacted line; and what a local folder's files were like, so a memo knows when to read it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.evidence.ledger import (
    COMPACTED,
    MAX_ENTRY_BYTES,
    MAX_MONTH_BYTES,
    JobKey,
    compacted_paths,
    job_file_name,
    job_identity,
    job_paths,
    safe_name,
)
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry, why_unusable
from airflow_sm_prefs.facts import failure_cause
from airflow_sm_prefs.storage import object_storage, untrusted_files


@dataclass(frozen=True)
class FolderReading:
    by_job: dict[JobKey, LedgerEntry]
    bad: list[str]
    signature: Any  # what the folder's files were when read, None where unknown


@dataclass(frozen=True)
class FileReading:
    """What one file (a job's, or a compacted month) adds to its folder's reading."""

    entries: list[tuple[JobKey, LedgerEntry]]
    bad: list[str]


def judged_fields(keep: tuple[str, ...]) -> frozenset[str] | None:
    return None if set(keep) == set(LedgerEntry.__annotations__) else frozenset(keep)


def file_reading(
    folder_name: str, file_name: str, body: bytes, *, keep: tuple[str, ...], shared: dict[Any, Any]
) -> FileReading:
    """The entries of one file's bytes: a month's lines (``.jsonl``) or a job's object. ``shared``: one copy of
    each list, Region and DAG id across files and readings."""
    judged = judged_fields(keep)
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


def folder_of(files: list[FileReading], signature: Any) -> FolderReading:
    """One folder's reading from its files' in order: compacted months first, so a job's own file replaces its
    compacted line."""
    by_job: dict[JobKey, LedgerEntry] = {}
    bad: list[str] = []
    for part in files:
        by_job.update(part.entries)
        bad.extend(part.bad)
    return FolderReading(by_job, bad, signature)


def read_folder(folder: Any, keep: tuple[str, ...], shared: dict[Any, Any], signature: Any = None) -> FolderReading:
    """One local DAG folder's entries. ``signature``: what a memo saw of the folder's files just before reading
    them (None without a memo)."""
    try:
        jobs = list(job_paths(folder))
    except OSError as error:  # a folder that cannot be listed costs its own entries, not the report
        return FolderReading({}, [f"{folder.name}/: cannot be listed ({_why(error)})"], None)
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
        files.append(file_reading(folder.name, path.name, body, keep=keep, shared=shared))
    return folder_of(files, signature)


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


def folder_signature(folder: Any) -> Any:
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
