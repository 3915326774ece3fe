"""The fault campaign's scenarios on the production topology: PostgreSQL, Redis, CeleryExecutor, two Celery
workers and two triggerers (tests/production/stack.py). The scenarios are the campaign's own functions, run
against this module's stack; the audit is the same (0 duplicates, 0 orphans, every choice recorded). Its
results fill the PostgreSQL + Celery column of the reliability report (tests/faults/report.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from airflow_sm_prefs.local_stack import wait_for
from tests.faults import test_campaign as campaign
from tests.faults.audit import Expect, Row, audit, jobs_of
from tests.faults.report import PRODUCTION, collect_rows
from tests.faults.stack import PROJECT_DIR
from tests.production.stack import HEARTBEAT_TIMEOUT, ProductionStack

pytestmark = pytest.mark.airflow

ARTIFACTS = PROJECT_DIR / "artifacts" / "production"


@pytest.fixture(scope="module")
def notes() -> list[str]:
    return []


@pytest.fixture(scope="module")
def rows(notes: list[str]) -> Iterator[list[Row]]:
    yield from collect_rows(PRODUCTION, ARTIFACTS / "stack" / "scheduler.log", notes)


@pytest.fixture(scope="module")
def stack(rows: list[Row]) -> Iterator[ProductionStack]:
    production = ProductionStack(project_dir=PROJECT_DIR, workdir=ARTIFACTS / "stack")
    try:
        production.start()
        yield production
    finally:
        production.stop()


def test_a_trigger_taken_over_by_the_other_triggerer_leaves_its_job_running(
    stack: ProductionStack, rows: list[Row]
) -> None:
    """Two triggerers: kill the one running every trigger; the other takes them over (Airflow then calls
    on_kill on the moved triggers' old copies, which must not stop the jobs), and the jobs finish once."""
    dag_id = "fault_triggerer_restart"
    stack.set_capacity(campaign.QUEUED)
    run_id = stack.trigger(dag_id)
    wait_for(lambda: campaign._all_deferred(stack, dag_id, run_id, 4), 180, "four deferred shards")
    wait_for(lambda: campaign._queued_jobs(stack, dag_id, run_id) == 4, 60, "four queued jobs")
    stack.kill_component("triggerer-1")
    time.sleep(15)  # past the health-check threshold (10 s): triggerer-2 now runs every trigger
    stack.set_capacity({"ml.p5.48xlarge": 2, "ml.p4d.24xlarge": 2})
    stack.wait_run_done(dag_id, run_id)
    stack.start_component("triggerer-1")
    row = audit(
        stack,
        "2c. one of two triggerers SIGKILLed while 4 jobs queue; the other takes over",
        "SIGKILL triggerer-1, not restarted until the run ends",
        Expect(dag_id, run_id, {f"train[{i}]": "success" for i in range(4)}),
    )
    stopped = [
        job["name"] for jobs in jobs_of(stack, dag_id, run_id).values() for job in jobs if job["status"] == "Stopped"
    ]
    if stopped:
        row.problems.append(f"jobs stopped although their tasks stayed deferred: {stopped}")
    campaign._record(rows, row)


def test_the_stack_is_postgres_and_celery_with_two_workers_and_two_triggerers(stack: ProductionStack) -> None:
    health = stack.get("/api/v2/monitor/health", auth=False)
    assert health["metadatabase"]["status"] == "healthy"
    assert stack.airflow_env()["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert stack.airflow_env()["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    running = [name for name, process in stack.components.items() if process.poll() is None]
    assert sorted(running) == sorted(stack.airflow_components)
    assert sum(name.startswith("triggerer") for name in running) == 2
    assert sum(name.startswith("celery-worker") for name in running) == 2


def test_a_celery_worker_lost_while_its_task_waits_on_a_running_job(stack: ProductionStack, rows: list[Row]) -> None:
    """A task waiting in its worker slot (deferrable=False) loses its whole Celery worker, task process
    included. The scheduler times the task's heartbeat out, the retry runs on the other worker, reattaches to
    the running job and waits it out: one job, never stopped."""
    dag_id = "fault_worker_lost"
    run_id = stack.trigger(dag_id)

    def job_running() -> bool:
        job = campaign._job(stack, dag_id, run_id, "blocking_wait")
        return bool(job and job["secondary_status"] == "Training")

    wait_for(job_running, 180, "the job to run while its task waits in a worker slot")
    (ti,) = stack.task_instances(dag_id, run_id)
    lost = stack.component_running(ti["id"])
    stack.kill_component(lost)
    wait_for(lambda: stack.task_instances(dag_id, run_id)[0]["try_number"] >= 2, 240, "the scheduler to retry")
    stack.start_component(lost)
    stack.wait_run_done(dag_id, run_id, timeout=300)
    row = audit(
        stack,
        "1b. a Celery worker lost (SIGKILL to all its processes) while its task waits on a running job",
        f"SIGKILL to the worker running the task and every process it started; heartbeat timeout {HEARTBEAT_TIMEOUT} s",
        Expect(dag_id, run_id, {"blocking_wait": "success"}),
    )
    later = stack.task_logs(dag_id, run_id, "blocking_wait")[1:]
    if not later or "reattach" not in later[0] or any(": create (" in log for log in later):
        row.problems.append(f"try 2 should reattach and no later try create a job ({len(later) + 1} tries)")
    job = campaign._job(stack, dag_id, run_id, "blocking_wait", 0)
    if not job or job["status"] != "Completed":
        row.problems.append(f"the job should have run to completion, once: {job and job['status']}")
    campaign._record(rows, row)


test_worker_killed_after_create_before_defer = campaign.test_worker_killed_after_create_before_defer
test_triggerer_killed_while_jobs_queue = campaign.test_triggerer_killed_while_jobs_queue
test_throttling_and_server_errors = campaign.test_throttling_and_server_errors
test_emulator_restarts_while_jobs_wait = campaign.test_emulator_restarts_while_jobs_wait
test_users_mark_failed_clear_and_fail_a_run = campaign.test_users_mark_failed_clear_and_fail_a_run
test_pending_bound_and_incompatible_fallback = campaign.test_pending_bound_and_incompatible_fallback
