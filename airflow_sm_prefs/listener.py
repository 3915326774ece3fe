"""Stop the job of a task that nothing will watch again: one a user ended by hand, or one that failed for good
while its job still ran.

A deferred task marked failed or success (or caught in a DAG run marked failed) gets its trigger's
``on_kill`` only if a triggerer is running that trigger at that moment. In the seconds between the deferral
and a triggerer picking the trigger up, or while every triggerer is down, nothing would stop the job: it
would run, and bill, with no task watching it. The API server fires these listener hooks, with
``previous_state=None``, for every state a user sets, so the stop happens where the user acted.

A task's own failure (``previous_state`` set) is left to the task while a retry is to come: the retry
reattaches to the job. When the failure is final and the job is not known to have ended, no try will ever
look at the job again. That happens when a worker is lost while its task waits in the slot: the scheduler
fails the try once its heartbeat stops, and fires this hook in its own process; the job is stopped there.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from airflow_sm_prefs.attempts import FINISHED, STATE_KEY, JobClaim

log = logging.getLogger(__name__)


# The stop runs inside the caller's work (a user's API request, the scheduler's loop): bounded, not patient.
STOP_CALL_CONFIG = {"connect_timeout": 5, "read_timeout": 15, "retries": {"mode": "standard", "max_attempts": 3}}


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    if previous_state is None:
        stop_claimed_job(task_instance, "was set to a final state by hand")
    elif str(task_instance.state) == "failed":
        stop_claimed_job(task_instance, "failed with no retry left while its job had not ended")


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    if previous_state is None:
        stop_claimed_job(task_instance, "was set to a final state by hand")


def stop_claimed_job(task_instance: Any, why: str) -> None:
    claim = _claim_of(task_instance)
    if claim is None or claim.job_kind is None or claim.phase == FINISHED:
        return
    if not claim.stop_on_kill:
        log.info("stop_on_kill is off: leaving SageMaker job %s running", claim.job_name)
        return
    from airflow_sm_prefs.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.jobs import KINDS

    log.info(
        "Task %s.%s (%s, map index %s) %s; stopping its SageMaker job %s",
        task_instance.dag_id,
        task_instance.task_id,
        task_instance.run_id,
        task_instance.map_index,
        why,
        claim.job_name,
    )
    hook_kwargs = {**claim.hook_kwargs, "config": {**(claim.botocore_config or {}), **STOP_CALL_CONFIG}}
    try:
        SageMakerPreferenceHook(**hook_kwargs).stop_job(KINDS[claim.job_kind], claim.job_name, log)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not stop SageMaker job %s (%s); stop it in the SageMaker console", claim.job_name, error)


def _claim_of(task_instance: Any) -> JobClaim | None:
    from airflow.state import TaskScope, get_state_backend

    map_index = task_instance.map_index if task_instance.map_index is not None else -1
    scope = TaskScope(
        dag_id=task_instance.dag_id, run_id=task_instance.run_id, task_id=task_instance.task_id, map_index=map_index
    )
    return JobClaim.from_stored(get_state_backend().get(scope, STATE_KEY))
