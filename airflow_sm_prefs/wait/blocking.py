"""The wait in a worker slot (``deferrable=False``): the trigger's loop, with sleeps instead of a watcher.

It follows the same polling policy and the same observation step as the deferred wait, so both end for
the same reasons at the same moments; only where the waiting happens differs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pendulum

from airflow_sm_prefs.sagemaker import status_lines
from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook, is_transient
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.wait.polling import WaitFor, WaitOutcome, backoff_seconds, next_limit, observe, view_interval


def wait(
    hook: SageMakerPreferenceHook,
    view: JobView,
    *,
    wait_for: WaitFor,
    deadline: datetime | None,
    pending_deadline: datetime | None,
    check_interval: float,
    log: logging.Logger | Any,
    sleep: Any = time.sleep,
    observed: Callable[[JobView], None] | None = None,
) -> tuple[WaitOutcome, JobView]:
    """Poll the job until an observation ends the wait or a limit passes; the outcome and the last view.

    ``observed`` is called with every fresh view (the operator shows the job's new log lines there).
    """
    assert view.name is not None
    failures = 0
    delay = view_interval(check_interval, view)
    while True:
        remaining, limit = next_limit(pendulum.now("UTC"), deadline, pending_deadline, view.selected is not None)
        if remaining is not None and remaining <= 0:
            return limit, view
        sleep(delay if remaining is None else min(delay, remaining))
        try:
            fresh = hook.describe_job(view.kind, view.name)
        except Exception as error:
            if not is_transient(error):
                raise
            failures += 1
            delay = backoff_seconds(check_interval, failures)
            log.info("Transient error describing %s (%s); will retry", view.name, error)
            continue
        failures = 0
        fresh_view = JobView.parse(view.kind, fresh)
        if fresh_view.signature != view.signature:
            log.info(status_lines.status_line(fresh_view))
        view = fresh_view
        if observed is not None:
            observed(view)
        delay = view_interval(check_interval, view)
        outcome = observe(view, wait_for)
        if outcome is not None:
            return outcome, view
