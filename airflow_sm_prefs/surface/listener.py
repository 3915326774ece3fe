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

The claim comes from Airflow 3.3's task state store; on earlier lines, from the try's XCom in the metadata
database (both written by the task before it creates the job).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from airflow_sm_prefs.platform import airflow_lines
from airflow_sm_prefs.task.attempts import FINISHED, STATE_KEY, JobClaim

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


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    """A run marked failed, or failed for good. Airflow 3.3 reports each of its task instances above; earlier
    lines report only the run, so the jobs its tasks claimed in their XComs are stopped here."""
    if airflow_lines.has_task_state_store():
        return
    # Read once, before anything else: if reading the claims went wrong, the run's attributes might not load again.
    dag_id, run_id = dag_run.dag_id, dag_run.run_id
    try:
        claims = _claims_in_run_xcoms(dag_id, run_id)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not read the SageMaker jobs claimed in run %s (%s)", run_id, error)
        return
    for task_id, claim in claims:
        _stop(claim, f"Run {dag_id} {run_id} failed while task {task_id}'s job had not ended")


def stop_claimed_job(task_instance: Any, why: str) -> None:
    ti = task_instance
    who = f"Task {ti.dag_id}.{ti.task_id} ({ti.run_id}, map index {ti.map_index})"
    try:
        claim = _claim_of(task_instance)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not read the SageMaker job claimed by %s (%s)", ti.task_id, error)
        return
    if claim is not None:
        _stop(claim, f"{who} {why}")


def _stop(claim: JobClaim, why: str) -> None:
    if claim.job_kind is None or claim.phase == FINISHED:
        return
    if not claim.stop_on_kill:
        log.info("stop_on_kill is off: leaving SageMaker job %s running", claim.job_name)
        return
    from airflow_sm_prefs.request.jobs import KINDS
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    log.info("%s; stopping its SageMaker job %s", why, claim.job_name)
    hook_kwargs = {**claim.hook_kwargs, "config": {**(claim.botocore_config or {}), **STOP_CALL_CONFIG}}
    try:
        SageMakerPreferenceHook(**hook_kwargs).stop_job(KINDS[claim.job_kind], claim.job_name, log)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not stop SageMaker job %s (%s); stop it in the SageMaker console", claim.job_name, error)


def _claim_of(task_instance: Any) -> JobClaim | None:
    map_index = task_instance.map_index if task_instance.map_index is not None else -1
    if not airflow_lines.has_task_state_store():
        return _claim_in_xcom(task_instance, map_index)
    from airflow.state import TaskScope, get_state_backend

    scope = TaskScope(
        dag_id=task_instance.dag_id, run_id=task_instance.run_id, task_id=task_instance.task_id, map_index=map_index
    )
    return JobClaim.from_stored(get_state_backend().get(scope, STATE_KEY))


def _claim_in_xcom(task_instance: Any, map_index: int) -> JobClaim | None:
    """Airflow before 3.3 has no task state store: the try keeps its claim in its XCom (attempts.ClaimStore),
    which this process (API server, scheduler) reads from the metadata database."""
    from airflow.models.xcom import XComModel

    query = XComModel.get_many(
        run_id=task_instance.run_id,
        key=STATE_KEY,
        dag_ids=task_instance.dag_id,
        task_ids=task_instance.task_id,
        map_indexes=map_index,
        limit=1,
    )
    with _own_session() as session:
        row = session.scalars(query).first()
        return JobClaim.from_stored(XComModel.deserialize_value(row)) if row is not None else None


def _claims_in_run_xcoms(dag_id: str, run_id: str) -> list[tuple[str, JobClaim]]:
    from airflow.models.xcom import XComModel

    with _own_session() as session:
        rows: list[Any] = list(session.scalars(XComModel.get_many(run_id=run_id, key=STATE_KEY, dag_ids=dag_id)))
        found = [(row.task_id, JobClaim.from_stored(XComModel.deserialize_value(row))) for row in rows]
    return [(task_id, claim) for task_id, claim in found if claim is not None]


def _own_session() -> Any:
    """A session of this hook's own, on its own connection. The thread's scoped session is the caller's: in the
    scheduler it is inside a transaction that holds its locks and forbids commits (committing it raised "UNEXPECTED
    COMMIT" and ended the scheduler's loop, seen on Airflow 3.1), so reading the XComs must neither commit it
    nor close it."""
    from airflow.utils.session import create_session

    return create_session(scoped=False)
