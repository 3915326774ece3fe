"""A Describe response, parsed once into the fields everything else reads.

Describe responses arrive either from boto3 (``datetime`` values) or through a trigger event (ISO-8601
strings); both parse to the same view. The record, the progress lines, the metrics and the watcher read a
``JobView`` instead of digging through the raw dict again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pendulum

from airflow_sm_prefs.platform.redaction import redacted
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker import job_status


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


@dataclass(frozen=True)
class PendingPeriod:
    start: pendulum.DateTime
    end: pendulum.DateTime | None


@dataclass(frozen=True)
class JobView:
    kind: JobKind
    name: str | None
    arn: str | None
    status: str | None
    secondary_status: str | None
    status_message: str | None  # of the latest secondary-status transition
    selected_type: str | None
    selected_count: int | None
    selected_rank: int | None  # None before selection, or when the selected type is not in the list
    preferences: tuple[dict[str, Any], ...]
    uniform_count: int | None
    pending_periods: tuple[PendingPeriod, ...] | None  # None: the kind reports no secondary statuses
    created: pendulum.DateTime | None
    started: pendulum.DateTime | None
    ended: pendulum.DateTime | None
    last_modified: pendulum.DateTime | None
    failure_reason: str | None
    billable_seconds: int | None
    # The description this view was parsed from, for the few readers of fields no view holds (lineage's
    # output locations, the trigger's stored essentials); never parsed again.
    source: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def parse(cls, kind: JobKind, description: Mapping[str, Any]) -> JobView:
        resources = kind.resources(description)
        preferences = tuple(dict(entry) for entry in resources.get("InstancePreferences") or [])
        selected_type = resources.get("SelectedInstanceType")
        rank = next(
            (i for i, entry in enumerate(preferences) if entry.get("InstanceType") == selected_type),
            None,
        )
        transitions = description.get("SecondaryStatusTransitions")
        periods = None
        if transitions is not None:
            periods = tuple(
                PendingPeriod(start, to_time(t.get("EndTime")))
                for t in transitions
                if t.get("Status") == "Pending" and (start := to_time(t.get("StartTime"))) is not None
            )
        return cls(
            kind=kind,
            name=description.get(kind.name_field),
            arn=description.get(kind.arn_field),
            status=description.get(kind.status_field),
            secondary_status=description.get("SecondaryStatus"),
            status_message=redacted(transitions[-1].get("StatusMessage") if transitions else None),
            selected_type=selected_type,
            selected_count=int(resources.get("SelectedInstanceCount") or 0) if selected_type else None,
            selected_rank=rank if selected_type else None,
            preferences=preferences,
            uniform_count=resources.get("InstanceCount"),
            pending_periods=periods,
            created=to_time(description.get("CreationTime")),
            started=to_time(description.get(kind.start_field)),
            ended=to_time(description.get(kind.end_field)),
            last_modified=to_time(description.get("LastModifiedTime")),
            failure_reason=redacted(description.get("FailureReason")),
            billable_seconds=description.get("BillableTimeInSeconds"),
            source=description,
        )

    @property
    def selected(self) -> tuple[str, int] | None:
        if self.selected_type is None:
            return None
        return self.selected_type, self.selected_count or 0

    @property
    def terminal(self) -> bool:
        return job_status.has_ended(self.status)

    @property
    def fell_back(self) -> bool | None:
        """True on a fallback, False on the first choice, None when not (or not knowably) selected."""
        return self.selected_rank > 0 if self.selected_rank is not None else None

    @property
    def signature(self) -> tuple[Any, ...]:
        """What counts as a change worth publishing (and logging once)."""
        return (self.status, self.secondary_status, self.selected)

    def _ended_or(self, now: pendulum.DateTime) -> pendulum.DateTime:
        return (self.last_modified or now) if self.terminal else now

    def pending_seconds(self, now: pendulum.DateTime | None = None) -> float:
        """Seconds the job waited for capacity.

        Training: the summed length of its ``Pending`` secondary-status periods. Processing has no secondary
        status, so it is the time from creation until the job started (this includes instance provisioning,
        which training reports separately as ``Starting``).
        """
        now = now or pendulum.now("UTC")
        if self.pending_periods is not None:
            return sum(
                max(0.0, ((p.end or self._ended_or(now)) - p.start).total_seconds()) for p in self.pending_periods
            )
        if self.created is None:
            return 0.0
        started = self.started or self._ended_or(now)
        return max(0.0, (started - self.created).total_seconds())

    def run_seconds(self, now: pendulum.DateTime | None = None) -> float | None:
        if self.started is None:
            return None
        ended = self.ended or now or pendulum.now("UTC")
        return max(0.0, (ended - self.started).total_seconds())

    @property
    def plan_arn(self) -> str | None:
        """The Flexible Training Plan the selected preference draws on (paid by the plan, not on demand)."""
        rank = self.selected_rank
        if rank is None or rank >= len(self.preferences):
            return None
        plans = self.preferences[rank].get("TrainingPlanArns") or []
        return str(plans[0]) if plans else None

    @property
    def plan_backed(self) -> bool:
        return self.plan_arn is not None

    def describe_preferences(self) -> str:
        """'#1 ml.p5.48xlarge x1, #2 ml.p4d.24xlarge x2' for messages that must name every preference."""
        parts = []
        for rank, entry in enumerate(self.preferences):
            count = entry.get("InstanceCount", self.uniform_count)
            plan = " (training plan)" if entry.get("TrainingPlanArns") else ""
            parts.append(f"#{rank + 1} {entry.get('InstanceType')} x{count}{plan}")
        return ", ".join(parts)
