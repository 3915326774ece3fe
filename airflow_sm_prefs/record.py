"""The chosen-configuration record: one flat, JSON-safe dict built from a Describe response.

This is the XCom contract (documented in the README). Describe responses arrive either from boto3 (with
``datetime`` values) or through a trigger event (ISO-8601 strings); both are accepted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pendulum

from airflow_sm_prefs.jobs import TERMINAL_STATUSES, JobKind


def to_time(value: Any) -> pendulum.DateTime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return pendulum.instance(value).in_timezone("UTC")
    if isinstance(value, int | float):
        return pendulum.from_timestamp(value, tz="UTC")
    parsed = pendulum.parse(str(value))
    return parsed.in_timezone("UTC") if isinstance(parsed, pendulum.DateTime) else None


def iso(value: Any) -> str | None:
    moment = to_time(value)
    return moment.isoformat() if moment is not None else None


def jsonable(value: Any) -> Any:
    """A Describe response with datetimes as ISO-8601 strings (trigger events and XCom need plain JSON)."""
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def selected_rank(kind: JobKind, description: Mapping[str, Any]) -> int | None:
    selected = kind.selected(description)
    if selected is None:
        return None
    for rank, entry in enumerate(kind.resources(description).get("InstancePreferences") or []):
        if entry.get("InstanceType") == selected[0]:
            return rank
    return None


def pending_seconds(kind: JobKind, description: Mapping[str, Any], now: pendulum.DateTime | None = None) -> float:
    """Seconds the job waited for capacity.

    Training: the summed length of its ``Pending`` secondary-status periods. Processing has no secondary
    status, so it is the time from creation until SageMaker reported a selected type and the job started
    (this includes instance provisioning, which training reports separately as ``Starting``).
    """
    now = now or pendulum.now("UTC")
    transitions = description.get("SecondaryStatusTransitions")
    if transitions is not None:
        total = 0.0
        for transition in transitions:
            if transition.get("Status") != "Pending":
                continue
            start = to_time(transition.get("StartTime"))
            end = to_time(transition.get("EndTime")) or _ended_or(description, now)
            if start is not None:
                total += max(0.0, (end - start).total_seconds())
        return total
    created = to_time(description.get("CreationTime"))
    started = to_time(description.get(kind.start_field))
    if created is None:
        return 0.0
    if started is None:
        started = _ended_or(description, now)
    return max(0.0, (started - created).total_seconds())


def _ended_or(description: Mapping[str, Any], now: pendulum.DateTime) -> pendulum.DateTime:
    status = description.get("TrainingJobStatus") or description.get("ProcessingJobStatus")
    if status in TERMINAL_STATUSES:
        return to_time(description.get("LastModifiedTime")) or now
    return now


def run_seconds(kind: JobKind, description: Mapping[str, Any], now: pendulum.DateTime | None = None) -> float | None:
    started = to_time(description.get(kind.start_field))
    if started is None:
        return None
    ended = to_time(description.get(kind.end_field)) or now or pendulum.now("UTC")
    return max(0.0, (ended - started).total_seconds())


def selection(kind: JobKind, description: Mapping[str, Any], region: str | None) -> dict[str, Any] | None:
    """The early record pushed as XCom ``selection`` once SageMaker picked a preference."""
    chosen = kind.selected(description)
    if chosen is None:
        return None
    rank = selected_rank(kind, description)
    return {
        "job_name": description.get(kind.name_field),
        "job_kind": kind.name,
        "selected_instance_type": chosen[0],
        "selected_instance_count": chosen[1],
        "selected_rank": rank,
        "fell_back": bool(rank),
        "pending_seconds": round(pending_seconds(kind, description), 3),
        "region": region,
    }


def build(kind: JobKind, description: Mapping[str, Any], region: str | None) -> dict[str, Any]:
    """The operator's return value: everything a pipeline or a person needs about the chosen configuration."""
    chosen = kind.selected(description)
    rank = selected_rank(kind, description)
    billable = description.get("BillableTimeInSeconds")
    run = run_seconds(kind, description)
    return {
        "job_name": description.get(kind.name_field),
        "job_arn": description.get(kind.arn_field),
        "job_kind": kind.name,
        "status": description.get(kind.status_field),
        "secondary_status": description.get("SecondaryStatus"),
        "selected_instance_type": chosen[0] if chosen else None,
        "selected_instance_count": chosen[1] if chosen else None,
        "selected_rank": rank,
        "fell_back": bool(rank) if rank is not None else None,
        "preferences": jsonable(kind.resources(description).get("InstancePreferences") or []),
        "pending_seconds": round(pending_seconds(kind, description), 3),
        "run_seconds": round(run, 3) if run is not None else None,
        "billable_seconds": billable,
        "billable_instance_seconds": billable * chosen[1] if billable is not None and chosen else None,
        "failure_reason": description.get("FailureReason"),
        "region": region,
        "created_at": iso(description.get("CreationTime")),
        "started_at": iso(description.get(kind.start_field)),
        "ended_at": iso(description.get(kind.end_field)),
        "last_modified_at": iso(description.get("LastModifiedTime")),
    }


def describe_preferences(kind: JobKind, description: Mapping[str, Any]) -> str:
    """'#1 ml.p5.48xlarge x1, #2 ml.p4d.24xlarge x2' for messages that must name every preference."""
    resources = kind.resources(description)
    uniform = resources.get("InstanceCount")
    parts = []
    for rank, entry in enumerate(resources.get("InstancePreferences") or []):
        count = entry.get("InstanceCount", uniform)
        plan = " (training plan)" if entry.get("TrainingPlanArns") else ""
        parts.append(f"#{rank + 1} {entry.get('InstanceType')} x{count}{plan}")
    return ", ".join(parts)
