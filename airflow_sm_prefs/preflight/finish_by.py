"""``finish_by=``: a deadline ("the evaluation must be done by 06:00") turned into a pending bound.

Before submission, each preference gets the time it is expected to run: the median run time of this task's
completed jobs on that configuration in the capacity ledger, else its ``MaxRuntimeInSeconds``. An entry that
could no longer finish by the deadline even with capacity now is dropped (and recorded); if none fits the
task fails at once, naming the deadline. The job may then wait for capacity until the deadline less the
longest expected run among the entries kept, so whichever SageMaker selects can still finish in time.

Training lists with an accelerated type get that bound as ``MaxPendingTimeInSeconds`` when it is within what
SageMaker accepts (30 minutes to 28 days); otherwise, and always for processing, the operator enforces it
(stops the job at the bound and fails), as it does for processing's ``max_pending``.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_sm_prefs.preflight import entries
from airflow_sm_prefs.preflight.check import Arguments, Check, Listed, Run
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError, is_accelerated, is_templated

SERVICE_MIN_PENDING = 1800  # MaxPendingTimeInSeconds' floor (R23)
SERVICE_MAX_PENDING = 28 * 86400

RunTimeHistory = Callable[[str, int], "tuple[float, int] | None"]  # (type, count) -> (median seconds, jobs)


def judged(value: Any) -> pendulum.DateTime | str | None:
    """``finish_by`` as given: an aware datetime, an ISO 8601 time, or a template left for rendering."""
    if value is None or (isinstance(value, str) and is_templated(value)):
        return value
    return deadline_of(value)


def deadline_of(value: Any) -> pendulum.DateTime:
    """The rendered ``finish_by`` as a UTC time; ``RequestValidationError`` for anything else."""
    moment: Any = value
    if isinstance(value, str):
        try:
            # tz=None: text without an offset stays naive and is refused below, like a naive datetime (pendulum
            # would otherwise take it as UTC).
            moment = pendulum.parse(value.strip(), tz=None)
        except (ValueError, TypeError, OverflowError):
            moment = None
    if not isinstance(moment, dt.datetime):
        raise RequestValidationError(
            [f"finish_by must be a datetime or an ISO 8601 time (e.g. a template's rendering), got {value!r:.60}"]
        )
    if moment.tzinfo is None:
        raise RequestValidationError(
            [f"finish_by={moment.isoformat()} has no time zone: give one (pendulum and Airflow's dates have it)"]
        )
    return pendulum.instance(moment).in_tz("UTC")


@dataclass(frozen=True)
class FinishesBy(Check):
    """The check: entries that cannot finish by the deadline dropped, and the pending bound set, judged on the
    full list past what the guardrails dropped, so that ranks stay the user's own."""

    arguments = ("finish_by",)
    templated = ("finish_by",)

    finish_by: pendulum.DateTime | str

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> FinishesBy | None:
        value = judged(given.get("finish_by"))
        return cls(value) if value is not None else None

    def before_create(self, run: Run, listed: Listed) -> Listed:
        from airflow_sm_prefs.platform.formatting import format_seconds

        listed = listed.settle(run)
        ti = run.context["ti"]
        now = pendulum.now("UTC")
        earlier = {removed["rank"]: removed["reason"] for removed in listed.dropped}
        deadline = plan(
            run.kind,
            listed.given,
            finish_by=deadline_of(self.finish_by),
            now=now,
            history=ledger_history(ti.dag_id, ti.task_id, run.kind),
            excluded=earlier,
        )
        listed = listed.dropping(run, deadline.dropped)
        request, pending_until = applied(run.kind, listed.request, deadline, now)
        run.log.info(
            "finish_by=%s: the job may wait for capacity %s, until %s (the longest expected run kept: %s), %s",
            deadline.finish_by.to_iso8601_string(),
            format_seconds(deadline.pending_seconds),
            now.add(seconds=deadline.pending_seconds).to_iso8601_string(),
            format_seconds(max(deadline.expected_seconds.values())),
            "enforced by this task" if pending_until else "as MaxPendingTimeInSeconds",
        )
        return dataclasses.replace(listed, request=request, pending_until=pending_until)


@dataclass(frozen=True)
class DeadlinePlan:
    finish_by: pendulum.DateTime
    expected_seconds: dict[int, float]  # rank -> expected run time, for the entries kept
    explained: dict[int, str]  # rank -> where that expectation comes from
    dropped: dict[int, str]  # rank -> why it no longer fits
    pending_seconds: int  # how long, from now, the job may wait for capacity


def plan(
    kind: JobKind,
    request: Mapping[str, Any],
    *,
    finish_by: pendulum.DateTime,
    now: pendulum.DateTime,
    history: RunTimeHistory,
    excluded: Collection[int] = (),
) -> DeadlinePlan:
    """What the deadline leaves of the list; ``RequestValidationError`` if no entry can finish in time.
    Ranks in ``excluded`` (already dropped by the guardrails) are neither judged nor counted."""
    left = (finish_by - now).total_seconds()
    runtime = entries.max_runtime_seconds(request)
    expected: dict[int, float] = {}
    explained: dict[int, str] = {}
    dropped: dict[int, str] = {}
    for entry in entries.entries(kind, request):
        if entry.rank in excluded:
            continue
        past = history(entry.instance_type, entry.count)
        seconds, source = (
            (past[0], f"the median of this task's {past[1]} completed job(s) on it")
            if past
            else (float(runtime), "MaxRuntimeInSeconds, as the ledger has no completed job of this task on it")
        )
        if seconds >= left:
            dropped[entry.rank] = (
                f"{entry.label}: expected to run {_duration(seconds)} ({source}), and only {_duration(max(left, 0))} "
                f"remain until finish_by={finish_by.to_iso8601_string()}"
            )
        else:
            expected[entry.rank], explained[entry.rank] = seconds, source
    if not expected:
        raise RequestValidationError(
            [
                f"no preference can finish by finish_by={finish_by.to_iso8601_string()} "
                f"({_duration(max(left, 0))} from now)",
                *(dropped[rank] for rank in sorted(dropped)),
                "no SageMaker job was created",
            ]
        )
    pending = math.floor(left - max(expected.values()))
    return DeadlinePlan(finish_by, expected, explained, dropped, pending)


def applied(
    kind: JobKind, request: dict[str, Any], deadline: DeadlinePlan, now: pendulum.DateTime
) -> tuple[dict[str, Any], pendulum.DateTime | None]:
    """The request with the pending bound set where SageMaker enforces it, and the moment the operator must
    stop a still-waiting job itself (None when SageMaker does it). A new request: the one given, which is the
    list as given when no guardrail dropped an entry, is never changed."""
    request = copy.deepcopy(request)
    stopping = request.setdefault("StoppingCondition", {})
    given = stopping.get("MaxPendingTimeInSeconds")
    bound = min(deadline.pending_seconds, given) if isinstance(given, int) else deadline.pending_seconds
    kept_types = [entry.instance_type for entry in entries.entries(kind, request)]
    if (
        kind.service_enforces_pending_limit
        and any(is_accelerated(t) for t in kept_types)
        and bound >= SERVICE_MIN_PENDING
    ):
        stopping["MaxPendingTimeInSeconds"] = min(bound, SERVICE_MAX_PENDING)
        return request, None
    return request, now.add(seconds=bound)


def ledger_history(dag_id: str, task_id: str, kind: JobKind) -> RunTimeHistory:
    """Median run time per configuration of this task's completed jobs, from the capacity ledger."""
    from airflow_sm_prefs.analysis import report
    from airflow_sm_prefs.evidence import ledger_entry, ledger_reading

    runs: dict[tuple[str, int], list[float]] = {}
    for entry in ledger_reading.read(dag_id=dag_id, fields=ledger_entry.REPORT_FIELDS).entries:
        if entry["task_id"] != task_id or entry["job_kind"] != kind.name or entry["outcome"] != "completed":
            continue
        if entry["run_seconds"] is None or entry["selected_instance_type"] is None:
            continue
        key = (entry["selected_instance_type"], int(entry["selected_instance_count"] or 0))
        runs.setdefault(key, []).append(float(entry["run_seconds"]))

    def history(instance_type: str, count: int) -> tuple[float, int] | None:
        seconds = runs.get((instance_type, count))
        median = report.percentile(seconds or [], 0.5)
        return None if median is None or not seconds else (median, len(seconds))

    return history


def _duration(seconds: float) -> str:
    from airflow_sm_prefs.platform.formatting import format_seconds

    return format_seconds(seconds)
