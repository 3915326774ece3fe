"""When a wait must end: the whole wait's deadline and, where SageMaker does not enforce one, the pending one.

Deadlines are times here and in every waiter (the trigger, the blocking wait); text only where they cross a
boundary: a trigger's serialized arguments, its event, the claim."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import pendulum

from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.pending_limit import pending_limit
from airflow_sm_prefs.sagemaker.job_view import to_time

DEFAULT_RUNTIME = timedelta(days=1)  # SageMaker's default MaxRuntimeInSeconds
DEADLINE_SLACK = timedelta(hours=1)  # provisioning, upload and stop time around the pending and run limits


class WaitDeadlines(NamedTuple):
    deadline: datetime
    pending_deadline: datetime | None  # where the task, not SageMaker, stops a job still waiting


def wait_deadlines(
    kind: JobKind,
    request: Mapping[str, Any],
    *,
    submitted_at: str | None,
    max_pending: int | None,
    wait_timeout: int | None,
    pending_until: str | None = None,
) -> WaitDeadlines:
    """The wait's deadlines, counted from the first submission (``submitted_at``; default: now).

    The deadline is ``wait_timeout`` if given, else the pending limit + ``MaxRuntimeInSeconds`` + one hour.
    The pending deadline is set for kinds whose service enforces no pending limit (processing), and wherever
    ``pending_until`` (from ``finish_by``) says the task must stop a waiting job itself; the earlier wins.
    """
    start = to_time(submitted_at) or pendulum.now("UTC")
    stopping = request.get("StoppingCondition") or {}
    runtime = timedelta(seconds=stopping.get("MaxRuntimeInSeconds") or DEFAULT_RUNTIME.total_seconds())
    pending = pending_limit(kind, request, start=start, max_pending=max_pending, until=to_time(pending_until))
    if wait_timeout is not None:
        deadline = start + timedelta(seconds=wait_timeout)
    else:
        deadline = start + pending.wait + runtime + DEADLINE_SLACK
    return WaitDeadlines(deadline, pending.task_deadline)


def default_deadline(kind: JobKind) -> datetime:
    """The deadline of a wait that names none (an event from a trigger of a version that sent none): a job
    submitted now with no limits of its own."""
    return wait_deadlines(kind, {}, submitted_at=None, max_pending=None, wait_timeout=None).deadline
