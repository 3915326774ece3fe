"""The capacity ledger: every job's end, kept outside Airflow's metadata database.

One JSON object per job, at ``<ledger>/<dag_id>/<job name>.json``, through Airflow's ``ObjectStoragePath``:
a local folder by default (``$AIRFLOW_HOME/sm_prefs/ledger``, what ``make demo``, ``airflow standalone`` and
``airflow dags test`` share with no configuration), or one shared location for every host, set in
``[sm_prefs] ledger_path`` (``AIRFLOW__SM_PREFS__LEDGER_PATH``), e.g. ``s3://team-bucket/sm-prefs-ledger``
with ``[sm_prefs] ledger_conn_id`` naming its connection. A job's entry is named by the job, so writing it
again (a retry's record, a backfill) replaces it and nothing is counted twice; and it lives outside the
database, so task clears and ``airflow db clean`` leave it alone.

Writing never decides a task's outcome: a ledger that cannot be written logs a warning and the task goes on.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import pendulum

from airflow_sm_prefs.job_view import JobView, iso

log = logging.getLogger(__name__)

FORMAT = 1
CONFIG_SECTION = "sm_prefs"
Outcome = Literal["completed", "failed_after_start", "no_capacity", "stopped"]
OUTCOMES: tuple[Outcome, ...] = ("completed", "failed_after_start", "no_capacity", "stopped")


class LedgerEntry(TypedDict):
    format: int
    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    job_name: str
    job_arn: str | None
    job_kind: str
    region: str | None
    outcome: Outcome
    preferences: list[dict[str, Any]]
    selected_instance_type: str | None
    selected_instance_count: int | None
    selected_rank: int | None
    plan_backed: bool
    pending_seconds: float
    run_seconds: float | None
    billable_instance_seconds: int | None
    failure_reason: str | None
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    recorded_at: str
    source: Literal["task", "backfill"]


def outcome_of(view: JobView) -> Outcome:
    """How a job that ended, ended: what the report counts."""
    if view.status == "Completed":
        return "completed"
    if view.started is None:
        reason = view.failure_reason or ""
        return "no_capacity" if view.selected is None and reason.startswith("CapacityError") else "stopped"
    return "failed_after_start" if view.status == "Failed" else "stopped"


def entry_for(
    view: JobView, dag_id: str, task_id: str, run_id: str, map_index: int, region: str | None, source: str = "task"
) -> LedgerEntry:
    from airflow_sm_prefs.job_view import jsonable

    assert view.name is not None
    run = view.run_seconds()
    billable = view.billable_seconds
    selected_rank = view.selected_rank
    preferences = jsonable(list(view.preferences))
    chosen = preferences[selected_rank] if selected_rank is not None and selected_rank < len(preferences) else {}
    return LedgerEntry(
        format=FORMAT,
        dag_id=dag_id,
        task_id=task_id,
        run_id=run_id,
        map_index=map_index,
        job_name=view.name,
        job_arn=view.arn,
        job_kind=view.kind.name,
        region=region,
        outcome=outcome_of(view),
        preferences=preferences,
        selected_instance_type=view.selected_type,
        selected_instance_count=view.selected_count,
        selected_rank=selected_rank,
        plan_backed=bool(chosen.get("TrainingPlanArns")),
        pending_seconds=round(view.pending_seconds(), 3),
        run_seconds=round(run, 3) if run is not None else None,
        billable_instance_seconds=billable * view.selected_count if billable and view.selected_count else None,
        failure_reason=view.failure_reason,
        created_at=iso(view.created),
        started_at=iso(view.started),
        ended_at=iso(view.ended),
        recorded_at=pendulum.now("UTC").to_iso8601_string(),
        source="backfill" if source == "backfill" else "task",
    )


# -- where it lives ----------------------------------------------------------------------------------------------


def location() -> Any:
    """The ledger's root, an ``ObjectStoragePath`` (local unless ``[sm_prefs] ledger_path`` says otherwise)."""
    from airflow.configuration import conf
    from airflow.sdk import ObjectStoragePath

    home = os.environ.get("AIRFLOW_HOME") or conf.get("core", "airflow_home", fallback="~/airflow")
    default = f"file://{os.path.abspath(os.path.expanduser(home))}/sm_prefs/ledger"
    path = conf.get(CONFIG_SECTION, "ledger_path", fallback=None) or default
    conn_id = conf.get(CONFIG_SECTION, "ledger_conn_id", fallback=None)
    return ObjectStoragePath(path, conn_id=conn_id) if conn_id else ObjectStoragePath(path)


def _safe(name: str) -> str:
    # DAG ids allow letters, digits, dashes, dots and underscores; anything else cannot make a path either way.
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in name) or "_"


def write(entry: LedgerEntry, root: Any = None) -> bool:
    """Add or replace the job's entry; a warning (never an exception) when the ledger cannot be written.

    ``root``: an ``ObjectStoragePath`` or a local ``pathlib.Path`` (default: ``location()``)."""
    try:
        root = root if root is not None else location()
        folder = root / _safe(entry["dag_id"])
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{_safe(entry['job_name'])}.json"
        text = json.dumps(entry, sort_keys=True)
        if getattr(target, "protocol", "file") in ("file", "local", ""):
            # A local write goes through a temporary file, so a reader never sees half an entry.
            temporary = folder / f".{_safe(entry['job_name'])}.{os.getpid()}.tmp"
            temporary.write_text(text)
            os.replace(getattr(temporary, "path", temporary), getattr(target, "path", target))
        else:
            target.write_text(text)  # an object store's put is whole or nothing
        return True
    except Exception as error:
        log.warning("Could not record SageMaker job %s in the capacity ledger: %s", entry.get("job_name"), error)
        return False


@dataclass
class Reading:
    entries: list[LedgerEntry]
    bad: int  # unreadable, truncated or misshapen entries, counted and skipped
    bad_examples: list[str]


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "dag_id": str,
    "task_id": str,
    "job_name": str,
    "job_kind": str,
    "outcome": str,
    "pending_seconds": (int, float),
    "preferences": list,
}


def _problem(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return "not a JSON object"
    if raw.get("format") != FORMAT:
        return f"format {raw.get('format')!r} (this version reads {FORMAT})"
    for key, kind in _REQUIRED.items():
        if not isinstance(raw.get(key), kind):
            return f"{key} missing or of the wrong type"
    if raw["outcome"] not in OUTCOMES:
        return f"unknown outcome {raw['outcome']!r}"
    for key in ("run_seconds",):
        if raw.get(key) is not None and not isinstance(raw[key], int | float):
            return f"{key} is not a number"
    for key in ("selected_rank", "selected_instance_count", "map_index"):
        if raw.get(key) is not None and (not isinstance(raw[key], int) or isinstance(raw[key], bool)):
            return f"{key} is not an integer"
    for key in ("created_at", "started_at", "ended_at"):
        if raw.get(key) is not None and not _is_time(raw[key]):
            return f"{key} is not an ISO 8601 time"
    return None


def _is_time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return isinstance(pendulum.parse(value), pendulum.DateTime)
    except (ValueError, TypeError, OverflowError):
        return False


def read(root: Any = None, dag_id: str | None = None) -> Reading:
    """Every readable entry (of one DAG if given); bad ones are counted, never fatal."""
    root = root if root is not None else location()
    entries: list[LedgerEntry] = []
    bad: list[str] = []
    for path in _entry_paths(root, dag_id):
        try:
            raw = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError, OSError) as error:
            bad.append(f"{path.name}: {type(error).__name__}")
            continue
        problem = _problem(raw)
        if problem is not None:
            bad.append(f"{path.name}: {problem}")
            continue
        known = {key: raw.get(key) for key in LedgerEntry.__annotations__}  # unknown fields are dropped
        entries.append(known)  # type: ignore[arg-type]
    return Reading(entries, len(bad), bad[:5])


def _entry_paths(root: Any, dag_id: str | None) -> Iterator[Any]:
    if not root.exists():
        return
    folders = [root / _safe(dag_id)] if dag_id else [p for p in root.iterdir() if p.is_dir()]
    for folder in folders:
        if not folder.exists():
            continue
        for path in folder.iterdir():
            if path.name.endswith(".json") and not path.name.startswith("."):
                yield path


def known_jobs(root: Any = None) -> set[str]:
    root = root if root is not None else location()
    return {path.name[: -len(".json")] for path in _entry_paths(root, None)}
