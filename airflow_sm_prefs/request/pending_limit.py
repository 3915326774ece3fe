"""How long a job may wait for capacity, from its first submission: one rule, for preflight (which training plan
can take the job before it stops waiting) and for the task (when its own wait ends).

Where SageMaker enforces the limit (training), it is the request's ``MaxPendingTimeInSeconds``; elsewhere
(processing) it is the operator's ``max_pending``, which the task enforces itself. Either way without one, two
days. ``finish_by`` may bring it forward to a moment the task enforces (``until``): the earlier wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from airflow_sm_prefs.request.jobs import DEFAULT_PENDING_SECONDS, JobKind

DEFAULT_PENDING = timedelta(seconds=DEFAULT_PENDING_SECONDS)


@dataclass(frozen=True)
class PendingLimit:
    wait: timedelta  # how long from the start the job may wait for capacity
    task_deadline: datetime | None  # when the task itself stops a job still waiting; None where SageMaker does


def pending_limit(
    kind: JobKind, request: Mapping[str, Any], *, start: datetime, max_pending: int | None, until: datetime | None
) -> PendingLimit:
    """The limit of a job created (or first submitted) at ``start``."""
    stopping = request.get("StoppingCondition") or {}
    task_deadline = None
    if kind.service_enforces_pending_limit:
        stated = stopping.get("MaxPendingTimeInSeconds")
        wait = timedelta(seconds=stated) if stated else DEFAULT_PENDING
    else:
        wait = timedelta(seconds=max_pending) if max_pending else DEFAULT_PENDING
        task_deadline = start + wait if max_pending else None
    if until is not None:
        task_deadline = min(until, task_deadline or until)
        wait = min(wait, max(task_deadline - start, timedelta(0)))
    return PendingLimit(wait, task_deadline)
