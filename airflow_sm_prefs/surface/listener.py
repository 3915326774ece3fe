"""Stop the job of a task that someone or something meant to end: one a user ended by hand, or one whose worker
was lost while it held the job. Keep every other job running.

A deferred task marked failed or success (or caught in a DAG run marked failed) gets its trigger's
``on_kill`` only if a triggerer is running that trigger at that moment. In the seconds between the deferral
and a triggerer picking the trigger up, or while every triggerer is down, nothing would stop the job: it
would run, and bill, with no task watching it. The API server fires these listener hooks, with
``previous_state=None``, for every state a user sets, so the stop happens where the user acted.

A task's own failure (``previous_state`` set) is left to the task while a retry is to come: the retry
reattaches to the job. A final failure stops the job only when it is attributed: the claim says a worker held
the job in its slot (submitting it, or waiting on it without deferring), so the failure is that worker's loss,
and no try will ever look at the job again. Any other final failure while the job had not ended is one this
package cannot attribute: Airflow fails a deferred task whose trigger event re-queued it before the scheduler
took the deferring try's exit (the deferral race, ``wait/deferral_hold.py``), with the same message as for a
lost worker. Its job is kept running, and the claim (or, before 3.3, a tag on the job) says so: the try right
after it, a retry or a clear, reattaches to the job and records it.

The claim comes from Airflow 3.3's task state store; on earlier lines, from the try's XCom in the metadata
database (both written by the task before it creates the job).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any

from airflow.listeners import hookimpl

from airflow_sm_prefs.platform import airflow_lines
from airflow_sm_prefs.task.attempts import FINISHED, KEPT, STATE_KEY, WORKER_HELD, JobClaim

log = logging.getLogger(__name__)


# What the scheduler says of a run that failed because one of its tasks did (every supported line).
RUN_FAILED_BY_A_TASK = "task_failure"

# The stop runs inside the caller's work (a user's API request, the scheduler's loop): bounded, not patient.
STOP_CALL_CONFIG = {"connect_timeout": 5, "read_timeout": 15, "retries": {"mode": "standard", "max_attempts": 3}}


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    if previous_state is None:
        stop_claimed_job(task_instance, "was set to a final state by hand")
    elif str(task_instance.state) == "failed":
        settle_final_failure(task_instance)


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    if previous_state is None:
        stop_claimed_job(task_instance, "was set to a final state by hand")


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    """A run marked failed by hand, or ended by Airflow (a timeout, a deadlock). Airflow 3.3 reports each of its
    task instances above; earlier lines report only the run, so the jobs its tasks claimed in their XComs are
    stopped here. A run that failed because a task failed (``task_failure``) needs nothing here: that task's own
    failure was reported above, and judged there."""
    if airflow_lines.has_task_state_store() or msg == RUN_FAILED_BY_A_TASK:
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
    claim = _readable_claim(task_instance)
    if claim is not None:
        _stop(claim, f"{_who(task_instance)} {why}")


def settle_final_failure(task_instance: Any) -> None:
    """A task failed with no retry left: stop its job if its worker was lost, else keep it for the next try."""
    claim = _readable_claim(task_instance)
    if claim is None or claim.job_kind is None or claim.phase == FINISHED:
        return
    who = _who(task_instance)
    if claim.phase in WORKER_HELD:
        _stop(claim, f"{who} failed with no retry left while its worker held the job (the worker was lost)")
        return
    failed_try = int(task_instance.try_number or 0)
    log.warning(
        "%s failed with no retry left while SageMaker job %s was in its trigger's hands (claim: %s), for a reason "
        "this package cannot attribute (Airflow fails a task whose trigger event arrives before the scheduler took "
        "the deferral's exit: apache/airflow#67287). The job keeps running; clear the task to reattach to it "
        "and record it (no second job is launched).",
        who,
        claim.job_name,
        claim.phase,
    )
    try:
        _mark_kept(task_instance, claim, failed_try)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning(
            "Could not note that SageMaker job %s was kept (%s): a clear of the task will replace the job",
            claim.job_name,
            error,
        )


def _who(ti: Any) -> str:
    return f"Task {ti.dag_id}.{ti.task_id} ({ti.run_id}, map index {ti.map_index})"


def _readable_claim(task_instance: Any) -> JobClaim | None:
    try:
        return _claim_of(task_instance)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not read the SageMaker job claimed by %s (%s)", task_instance.task_id, error)
        return None


def _mark_kept(task_instance: Any, claim: JobClaim, failed_try: int) -> None:
    """Where the next execution looks: the claim in the task state store (3.3), else a tag on the job itself
    (earlier lines rebuild the claim from the job's tags, as a new try starts with no XCom)."""
    kept = claim.advanced(KEPT, kept_after_try=failed_try)
    if airflow_lines.has_task_state_store():
        _keep_in_state_store(task_instance, kept)
        return
    from airflow_sm_prefs.request.jobs import KINDS
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.sagemaker.tagging import KEPT_AFTER_TRY

    assert claim.job_kind is not None
    hook = SageMakerPreferenceHook(**_bounded(claim))
    hook.tag_job(KINDS[claim.job_kind], claim.job_name, {KEPT_AFTER_TRY: str(failed_try)})


def _keep_in_state_store(task_instance: Any, kept: JobClaim) -> None:
    """Write the claim as the Execution API writes a task's (JSON text, the configured retention), on a session
    of this hook's own."""
    from datetime import UTC, datetime, timedelta

    from airflow.configuration import conf

    days = conf.getint("state_store", "default_retention_days", fallback=30)
    expires_at = None if days <= 0 else datetime.now(UTC) + timedelta(days=days)
    backend, scope = _state_backend_and_scope(task_instance)
    with _own_session() as session:
        backend.set(scope, STATE_KEY, json.dumps(asdict(kept)), expires_at=expires_at, session=session)


def _bounded(claim: JobClaim) -> dict[str, Any]:
    """The claim's hook arguments with the listener's own short deadlines."""
    return claim.connection.with_call_config(STOP_CALL_CONFIG).hook_arguments()


def _stop(claim: JobClaim, why: str) -> None:
    if claim.job_kind is None or claim.phase == FINISHED:
        return
    if not claim.stop_on_kill:
        log.info("stop_on_kill is off: leaving SageMaker job %s running", claim.job_name)
        return
    from airflow_sm_prefs.request.jobs import KINDS
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    log.info("%s; stopping its SageMaker job %s", why, claim.job_name)
    try:
        SageMakerPreferenceHook(**_bounded(claim)).stop_job(KINDS[claim.job_kind], claim.job_name, log)
    except Exception as error:  # the action that fired this hook must go through whatever happens here
        log.warning("Could not stop SageMaker job %s (%s); stop it in the SageMaker console", claim.job_name, error)


def _claim_of(task_instance: Any) -> JobClaim | None:
    if not airflow_lines.has_task_state_store():
        return _claim_in_xcom(task_instance, _map_index(task_instance))
    backend, scope = _state_backend_and_scope(task_instance)
    return JobClaim.from_stored(backend.get(scope, STATE_KEY))


def _map_index(task_instance: Any) -> int:
    return task_instance.map_index if task_instance.map_index is not None else -1


def _state_backend_and_scope(task_instance: Any) -> tuple[Any, Any]:
    from airflow.state import TaskScope, get_state_backend

    ti = task_instance
    scope = TaskScope(dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, map_index=_map_index(ti))
    return get_state_backend(), scope


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
