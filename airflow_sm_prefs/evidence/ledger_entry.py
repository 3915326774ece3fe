"""One job's entry in the capacity ledger: its fields, stated once, and what a reader accepts of them.

``LedgerEntry`` names every field with its type and, beside it, how a reader judges it and whether the report
keeps it. ``SCHEMA`` (what ``why_unusable`` checks) and ``REPORT_FIELDS`` (what the report and the Capacity page
hold of 100,000 entries) are read from it, so a new field is one line here; ``entry_for`` builds an entry from a
job's facts, and the type checker holds it to the same fields.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Annotated, Any, Literal, NamedTuple, NotRequired, TypedDict, get_args, get_type_hints

import pendulum

from airflow_sm_prefs.facts import failure_cause, utilization
from airflow_sm_prefs.facts.job_facts import OUTCOMES, JobFacts, JobOutcome
from airflow_sm_prefs.request.preferences import MAX_PREFERENCES

FORMAT = 1


class Field(NamedTuple):
    """How a reader judges one field: its kind ("text", "amount", "time", ...; with "?" it may be null or
    absent), and whether the report keeps it."""

    kind: str
    report: bool = False


_Text = Annotated[str, Field("text", report=True)]
_TextOrNone = Annotated[str | None, Field("text?", report=True)]
_AmountOrNone = Annotated[float | None, Field("amount?", report=True)]
_TimeOrNone = Annotated[str | None, Field("time?", report=True)]
_CountOrNone = Annotated[int | None, Field("integer?", report=True)]


class LedgerEntry(TypedDict):
    format: Annotated[int, Field("format")]
    dag_id: _Text
    task_id: _Text
    run_id: Annotated[str, Field("text?", report=True)]
    map_index: Annotated[int, Field("integer?", report=True)]
    job_name: _Text
    job_arn: _TextOrNone
    job_kind: _Text
    # The first choice's wait at the times jobs fell back is read from every job's list, Region and account.
    region: _TextOrNone
    outcome: Annotated[JobOutcome, Field("outcome", report=True)]
    preferences: Annotated[list[dict[str, Any]], Field("preferences", report=True)]
    selected_instance_type: _TextOrNone
    selected_instance_count: _CountOrNone
    selected_rank: _CountOrNone
    plan_backed: Annotated[bool, Field("flag?", report=True)]
    training_plan_arn: NotRequired[_TextOrNone]  # the plan the job ran on (older entries have none)
    pending_seconds: Annotated[float, Field("amount", report=True)]
    run_seconds: _AmountOrNone
    billable_instance_seconds: Annotated[float | None, Field("amount?")]
    estimated_cost_usd: _AmountOrNone
    cost_basis: Annotated[str, Field("text?", report=True)]
    workload: Annotated[str | None, Field("text?")]
    certified_run_seconds: _AmountOrNone  # the chosen configuration's benchmark, when the task names a workload
    # Why a job failed: only a hardware failure counts against its configuration; the reason names the rest.
    failure_reason: _TextOrNone
    # failure_cause.CAUSES; older entries have none and are read with the cause of their failure_reason.
    failure_cause: NotRequired[Annotated[str | None, Field("cause?", report=True)]]
    # utilization.Utilization.as_json(): per metric its mean and p90, in percent of one device; None: unknown.
    utilization: NotRequired[Annotated[dict[str, dict[str, float] | None] | None, Field("utilization?", report=True)]]
    created_at: _TimeOrNone
    started_at: Annotated[str | None, Field("time?")]
    ended_at: Annotated[str | None, Field("time?")]
    recorded_at: Annotated[str, Field("time?")]
    source: Annotated[Literal["task", "backfill"], Field("text?")]


def _field(hint: Any) -> Field:
    while not hasattr(hint, "__metadata__"):  # NotRequired[Annotated[...]]
        (hint,) = get_args(hint)
    (found,) = (meta for meta in hint.__metadata__ if isinstance(meta, Field))
    return found


_FIELDS = {name: _field(hint) for name, hint in get_type_hints(LedgerEntry, include_extras=True).items()}
# Every field and what it holds. A reader judges the optional fields it keeps and every required one
# (``preferences`` only when kept: the report may leave it out).
SCHEMA: dict[str, str] = {name: field.kind for name, field in _FIELDS.items()}
# What the report and the Capacity page read of each entry: holding only these keeps 100,000 jobs small.
REPORT_FIELDS = tuple(name for name, field in _FIELDS.items() if field.report)


def entry_for(
    facts: JobFacts, *, dag_id: str, task_id: str, run_id: str, map_index: int, source: str = "task"
) -> LedgerEntry:
    view = facts.view
    assert view.name is not None
    return LedgerEntry(
        format=FORMAT,
        dag_id=dag_id,
        task_id=task_id,
        run_id=run_id,
        map_index=map_index,
        job_name=view.name,
        job_arn=view.arn,
        job_kind=view.kind.name,
        region=facts.region,
        outcome=facts.outcome,
        preferences=facts.preferences,
        selected_instance_type=view.selected_type,
        selected_instance_count=view.selected_count,
        selected_rank=view.selected_rank,
        plan_backed=view.plan_backed,
        training_plan_arn=view.plan_arn,
        pending_seconds=facts.pending_seconds,
        run_seconds=facts.run_seconds,
        billable_instance_seconds=facts.billable_instance_seconds,
        estimated_cost_usd=facts.estimated_cost_usd,
        cost_basis=facts.cost_basis,
        workload=facts.workload,
        certified_run_seconds=facts.certified_run_seconds,
        failure_reason=view.failure_reason,
        failure_cause=facts.failure.cause if facts.failure else None,
        utilization=facts.utilization.as_json() if facts.utilization else None,
        created_at=facts.created_at,
        started_at=facts.started_at,
        ended_at=facts.ended_at,
        recorded_at=pendulum.now("UTC").to_iso8601_string(),
        source="backfill" if source == "backfill" else "task",
    )


_REQUIRED_TYPES: dict[str, type | tuple[type, ...]] = {
    "text": str,
    "outcome": str,
    "amount": (int, float),
    "preferences": list,
}
_REQUIRED = tuple((key, _REQUIRED_TYPES[kind]) for key, kind in SCHEMA.items() if kind in _REQUIRED_TYPES)
# The optional fields by kind, in the order they are judged (a tuple each, as the reader loops over 100,000 entries).
_NUMBERS, _TEXTS, _FLAGS, _INTEGERS, _TIMES = (
    tuple(key for key, kind in SCHEMA.items() if kind == optional)
    for optional in ("amount?", "text?", "flag?", "integer?", "time?")
)
_CAUSES = tuple(key for key, kind in SCHEMA.items() if kind == "cause?")
_UTILIZATIONS = tuple(key for key, kind in SCHEMA.items() if kind == "utilization?")


def why_unusable(raw: Any, keys: Collection[str] | None = None) -> str | None:
    """Why an entry cannot be used, judging the keys a reader keeps (all by default) and the ones every
    reader needs; None when it can."""
    if not isinstance(raw, dict):
        return "not a JSON object"
    if raw.get("format") != FORMAT:
        return f"format {raw.get('format')!r} (this version reads {FORMAT})"
    for key, kind in _REQUIRED:
        if (keys is None or key in keys or key != "preferences") and not isinstance(raw.get(key), kind):
            return f"{key} missing or of the wrong type"
    if raw["outcome"] not in OUTCOMES:
        return f"unknown outcome {raw['outcome']!r}"
    for key in _UTILIZATIONS:
        if (keys is None or key in keys) and not utilization.is_recorded_shape(raw.get(key)):
            return f"{key} is not a mapping of metrics to their mean and p90"
    for key in _CAUSES:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys) and value not in failure_cause.CAUSES:
            return f"{key} is not one of {', '.join(failure_cause.CAUSES)}"
    if not _is_amount(raw["pending_seconds"]):
        return "pending_seconds is negative or not a number"
    for key in _NUMBERS:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys) and not _is_amount(value):
            return f"{key} is not a finite, non-negative number"
    for key in _TEXTS:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys) and not isinstance(value, str):
            return f"{key} is not text"
    for key in _FLAGS:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys) and not isinstance(value, bool):
            return f"{key} is not true or false"
    if (keys is None or "preferences" in keys) and not all(
        isinstance(p, dict)
        and isinstance(p.get("InstanceType"), str)
        and (p.get("InstanceCount") is None or type(p.get("InstanceCount")) is int)
        for p in raw["preferences"]
    ):
        return "preferences is not a list of {InstanceType, InstanceCount} objects"
    for key in _INTEGERS:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys):
            if type(value) is not int:
                return f"{key} is not an integer"
            low, high = _INTEGER_BOUNDS.get(key, (None, None))
            if (low is not None and value < low) or (high is not None and value > high):
                return f"{key} {value} is outside {low}..{'' if high is None else high}"
    for key in _TIMES:
        value = raw.get(key)
        if value is not None and (keys is None or key in keys) and not is_time(value):
            return f"{key} is not an ISO 8601 time"
    return None


# A rank is a place in a list of at most five; a count is of instances; a map index is -1 when not mapped.
_INTEGER_BOUNDS: dict[str, tuple[int | None, int | None]] = {
    "selected_rank": (0, MAX_PREFERENCES - 1),
    "selected_instance_count": (1, None),
    "map_index": (-1, None),
}


def _is_amount(value: Any) -> bool:
    # The reader refuses NaN and Infinity as JSON; a number still has to be one a report can add up.
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf")


def is_time(value: Any) -> bool:
    # datetime's own ISO parser: pendulum's is several times slower, which 100,000 entries feel.
    if not isinstance(value, str):
        return False
    try:
        return dt.datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False
