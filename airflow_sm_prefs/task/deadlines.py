"""When a wait must end: the whole wait's deadline and, where SageMaker does not enforce one, the pending one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pendulum

from airflow_sm_prefs.request.jobs import DEFAULT_PENDING_SECONDS, JobKind
from airflow_sm_prefs.sagemaker.job_view import to_time

DEFAULT_PENDING = timedelta(seconds=DEFAULT_PENDING_SECONDS)
DEFAULT_RUNTIME = timedelta(days=1)  # SageMaker's default MaxRuntimeInSeconds
DEADLINE_SLACK = timedelta(hours=1)  # provisioning, upload and stop time around the pending and run limits


def wait_deadlines(
    kind: JobKind,
    request: Mapping[str, Any],
    *,
    submitted_at: str | None,
    max_pending: int | None,
    wait_timeout: int | None,
    pending_until: str | None = None,
) -> tuple[str, str | None]:
    """(deadline, pending_deadline) as ISO-8601 strings, counted from the first submission.

    The deadline is ``wait_timeout`` if given, else the pending limit + ``MaxRuntimeInSeconds`` + one hour.
    The pending deadline is set for kinds whose service enforces no pending limit (processing), and wherever
    ``pending_until`` (from ``finish_by``) says the task must stop a waiting job itself; the earlier wins.
    """
    start = to_time(submitted_at) or pendulum.now("UTC")
    stopping = request.get("StoppingCondition") or {}
    runtime = timedelta(seconds=stopping.get("MaxRuntimeInSeconds") or DEFAULT_RUNTIME.total_seconds())
    pending_deadline = None
    if kind.service_enforces_pending_limit:
        pending_seconds = stopping.get("MaxPendingTimeInSeconds")
        pending = timedelta(seconds=pending_seconds) if pending_seconds else DEFAULT_PENDING
    else:
        pending = timedelta(seconds=max_pending) if max_pending else DEFAULT_PENDING
        pending_deadline = (start + pending).isoformat() if max_pending else None
    until = to_time(pending_until)
    if until is not None:
        earlier = min(until, to_time(pending_deadline) or until)
        pending_deadline = earlier.isoformat()
        pending = min(pending, max(earlier - start, timedelta(0)))
    if wait_timeout is not None:
        deadline = start + timedelta(seconds=wait_timeout)
    else:
        deadline = start + pending + runtime + DEADLINE_SLACK
    return deadline.isoformat(), pending_deadline
