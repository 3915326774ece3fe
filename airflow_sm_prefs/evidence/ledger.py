"""The capacity ledger: every job's end, kept outside Airflow's metadata database.

One JSON object per job, at ``<ledger>/<dag_id>/<job name>.<region>.json``, through Airflow's ``ObjectStoragePath``:
a local folder by default (``$AIRFLOW_HOME/sm_prefs/ledger``, what ``make demo``, ``airflow standalone`` and
``airflow dags test`` share with no configuration), or one shared location for every host, set in
``[sm_prefs] ledger_path`` (``AIRFLOW__SM_PREFS__LEDGER_PATH``), e.g. ``s3://team-bucket/sm-prefs-ledger``
with ``[sm_prefs] ledger_conn_id`` naming its connection. A job's entry is named by the job and its Region
(SageMaker's names are unique per account and Region), so writing it again (a retry's record, a backfill)
replaces it and nothing is counted twice; and it lives outside the database, so task clears and ``airflow db
clean`` leave it alone.

Writing (``ledger_writing``) never decides a task's outcome: a ledger that cannot be written logs a warning and the
task goes on.

Compaction (``ledger_compaction``) folds the entries older than a day into one JSON-lines file per DAG and month
(``<ledger>/<dag_id>/compacted/<YYYY-MM>.jsonl``), so a report over years of nightly runs reads hundreds of
files, not a hundred thousand. A job's own file, if one is written again later (a backfill), wins over its
compacted line.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import re
import urllib.parse
import uuid
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry
from airflow_sm_prefs.request.preferences import REGION_SHAPE
from airflow_sm_prefs.storage import object_storage, untrusted_files

log = logging.getLogger(__name__)

CONFIG_SECTION = "sm_prefs"
COMPACTED = "compacted"
# -- where it lives ----------------------------------------------------------------------------------------------


def location() -> Any:
    """The ledger's root, an ``ObjectStoragePath``: ``[sm_prefs] ledger_path``, else ``<[sm_prefs] storage>/ledger``,
    else local; ``object_storage.StorageUnavailable`` when its filesystem is not installed."""
    root = object_storage.shared_file("ledger_path", "ledger", conn_option="ledger_conn_id")
    if object_storage.is_host_path(root):  # one API for both: readers and compaction walk it as object storage
        return object_storage.open_root(f"file://{root.absolute()}", None, f"[{CONFIG_SECTION}] ledger_path")
    return root


def safe_name(name: str) -> str:
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


def job_file_name(entry: LedgerEntry | dict[str, Any]) -> str:
    """A job's own object in its DAG's folder: ``<job name>.<region>.json``. SageMaker's names are unique per
    account and Region only, so one DAG's two jobs of one name in two Regions keep two objects. An entry with
    no Region (and every entry written before the Region was in the name) is ``<job name>.json``."""
    region = entry.get("region")
    if isinstance(region, str) and region:
        return f"{safe_name(entry['job_name'])}.{safe_name(region)}.json"
    return f"{safe_name(entry['job_name'])}.json"


_REGIONAL_FILE = re.compile(rf"(?P<name>.+)\.(?P<region>{REGION_SHAPE.pattern})\.json")


def job_of_file_name(file_name: str) -> tuple[str | None, str]:
    """``job_file_name`` read back: (Region, job name) of a job's own object; no Region in the older form."""
    regional = _REGIONAL_FILE.fullmatch(file_name)
    if regional:
        return urllib.parse.unquote(regional["region"]), urllib.parse.unquote(regional["name"])
    return None, urllib.parse.unquote(file_name.removesuffix(".json"))


FOLDABLE_AFTER = dt.timedelta(days=1)


MAX_ENTRY_BYTES = 1 << 20  # one job's entry: a few KB; the limit keeps /dev/zero and its kind out
MAX_MONTH_BYTES = 1 << 29  # a DAG's month of compacted entries: 100,000 jobs are about 100 MB


# What makes a job one job in the ledger: its DAG's folder, its Region and its name. SageMaker's names are unique
# per account and Region only, and the folder keeps one DAG's objects from replacing another's.
JobKey = tuple[str, str | None, str]


def job_identity(raw: Mapping[str, Any]) -> tuple[str | None, str]:
    """What tells one job of a DAG from another: its Region (None where an entry has none) and its name."""
    region = raw.get("region")
    return (region if isinstance(region, str) else None, str(raw["job_name"]))


def is_job_object(key: str) -> bool:
    """Whether a key below the ledger's root is one job's own object (``<dag>/<job>.json``), not a month."""
    folder, _, rest = key.partition("/")
    return bool(folder) and "/" not in rest and is_ledger_file(rest)


def is_ledger_file(rest: str) -> bool:
    """Whether a key below a DAG's folder is a job's object or a compacted month (a leading "." is temporary)."""
    parts = rest.split("/")
    if len(parts) == 1:
        return parts[0].endswith(".json") and not parts[0].startswith(".")
    return len(parts) == 2 and parts[0] == COMPACTED and parts[1].endswith(".jsonl") and not parts[1].startswith(".")


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
            candidates = [root / safe_name(dag_id)]
        elif dags is not None:
            candidates = [root / name for name in sorted({safe_name(dag) for dag in dags})]
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


def compacted_paths(folder: Any) -> Iterator[Any]:
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
        for path in compacted_paths(folder):
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
