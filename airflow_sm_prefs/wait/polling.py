"""One polling policy for every wait: how often to look, how to back off, and what an observation means.

The triggerer's shared watcher and the operator's blocking wait both follow it, so a job is looked at on
the same clock whichever way the task waits: queued jobs half as often as the base interval (capacity can
take hours), imminent changes (provisioning, uploading, stopping) four times as often.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from airflow_sm_prefs.sagemaker import job_status
from airflow_sm_prefs.sagemaker.job_view import JobView

MAX_BACKOFF_SECONDS = 300.0

WaitFor = Literal["selection", "completion"]


class WaitOutcome(StrEnum):
    """Why a wait ended: the ``status`` of a trigger event and of the blocking wait's result."""

    SELECTED = "selected"  # SageMaker picked a preference (when waiting for the selection)
    FINISHED = "finished"  # the job reached a terminal status
    PENDING_TIMEOUT = "pending_timeout"  # no capacity by the operator's own pending deadline
    TIMEOUT = "timeout"  # the whole wait's deadline passed
    ERROR = "error"  # the job can no longer be observed


def interval_for(base: float, status: str | None, secondary: str | None, selected: bool) -> float:
    """Seconds until the next look at a job in this state, for a base ``check_interval``."""
    if job_status.has_ended(status):
        return base * 4
    if job_status.about_to_change(status, secondary):
        return max(1.0, base / 4)
    if not selected:  # queued for capacity: it may take hours
        return min(MAX_BACKOFF_SECONDS, base * 2)
    return base


def view_interval(base: float, view: JobView) -> float:
    return interval_for(base, view.status, view.secondary_status, view.selected is not None)


def backoff_seconds(interval: float, failures: int) -> float:
    """Wait before the next try after ``failures`` transient errors in a row: doubling, capped at 5 minutes."""
    return min(MAX_BACKOFF_SECONDS, interval * 2.0 ** min(failures, 8) / 4)


def observe(view: JobView, wait_for: WaitFor) -> WaitOutcome | None:
    """What a fresh observation of the job means for a wait; None: keep waiting."""
    if view.terminal:
        return WaitOutcome.FINISHED
    if wait_for == "selection" and view.selected is not None:
        return WaitOutcome.SELECTED
    return None


def next_limit(
    now: datetime, deadline: datetime | None, pending_deadline: datetime | None, selected: bool
) -> tuple[float | None, WaitOutcome]:
    """Seconds until the nearest limit that applies (None: no limit), and what reaching it means.

    The pending deadline applies only until SageMaker selects a preference.
    """
    limits: list[tuple[float, WaitOutcome]] = []
    if deadline is not None:
        limits.append(((deadline - now).total_seconds(), WaitOutcome.TIMEOUT))
    if pending_deadline is not None and not selected:
        limits.append(((pending_deadline - now).total_seconds(), WaitOutcome.PENDING_TIMEOUT))
    if not limits:
        return None, WaitOutcome.TIMEOUT
    seconds, outcome = min(limits)
    return max(0.0, seconds), outcome
