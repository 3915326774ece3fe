"""Writing the capacity ledger: a job's entry put whole, and kept on this host while a shared store refuses it.

A write never decides a task's outcome: a ledger that cannot be written logs a warning and the task goes on. An
entry a shared store refused is kept on the host that wrote it (``spool_folder()``), one file per job, and sent
with the next entry that host writes, unless the store meanwhile holds a better one (``_stored_is_newer``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_sm_prefs.evidence import ledger
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry, why_unusable
from airflow_sm_prefs.storage import object_storage, paths, untrusted_files

log = logging.getLogger(__name__)


def write(entry: LedgerEntry, root: Any = None) -> bool:
    """Add or replace the job's entry; a warning (never an exception) when the ledger cannot be written.

    ``root``: an ``ObjectStoragePath`` or a local ``pathlib.Path`` (default: ``ledger.location()``). Bounded by
    ``[sm_prefs] storage_timeout``: a store that does not answer costs the task no more than that. An entry a
    shared store refused is kept on this host (``spool_folder()``) and sent with the next entry this host
    writes; True when the entry reached the ledger."""
    from airflow_sm_prefs.storage import bounded

    target: list[Any] = []

    def put() -> None:
        target.append(root if root is not None else ledger.location())
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


def _put(entry: LedgerEntry | dict[str, Any], root: Any) -> None:
    folder = root / ledger.safe_name(entry["dag_id"])
    object_storage.make_folder(folder)
    ledger.replace_file(folder / ledger.job_file_name(entry), json.dumps(entry, sort_keys=True))


# -- entries a shared store refused, kept on the host that wrote them -------------------------------------------
# Read by this host alone (it sends them), so a local folder breaks no rule of the shared store; one file per
# job, so an entry kept twice is kept once.
MAX_SPOOLED = 1_000  # a store down for days on a busy host: entries past this are left to `ledger backfill`


def spool_folder() -> Path:
    return Path(paths.default_file("ledger-spool"))


def _spooled(entry: LedgerEntry) -> bool:
    try:
        folder = spool_folder() / ledger.safe_name(entry["dag_id"])
        if sum(1 for _ in spool_folder().glob("*/*.json")) >= MAX_SPOOLED:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        ledger.replace_file(folder / ledger.job_file_name(entry), json.dumps(entry, sort_keys=True))
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
                raw = untrusted_files.load_json(untrusted_files.read_bytes(path, ledger.MAX_ENTRY_BYTES), path.name)
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
    target = root / ledger.safe_name(kept["dag_id"]) / ledger.job_file_name(kept)
    try:
        stored = untrusted_files.load_json(untrusted_files.read_bytes(target, ledger.MAX_ENTRY_BYTES), target.name)
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
