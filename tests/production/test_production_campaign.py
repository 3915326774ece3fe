"""The fault campaign's scenarios on the production topology: PostgreSQL, Redis, CeleryExecutor, two Celery
workers and two triggerers (tests/production/stack.py). The scenarios are the campaign's own functions, run
against this module's stack; the audit is the same (0 duplicates, 0 orphans, every choice recorded). Its
results fill the PostgreSQL + Celery column of the reliability report (tests/faults/report.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from sm_prefs_devkit.local_stack import control, wait_for
from tests.faults import test_campaign as campaign
from tests.faults.audit import Expect, Row, audit, jobs_of
from tests.faults.report import PRODUCTION, collect_rows
from tests.faults.stack import PROJECT_DIR
from tests.production.stack import HEARTBEAT_TIMEOUT, ProductionStack

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

pytestmark = pytest.mark.airflow

ARTIFACTS = PROJECT_DIR / "artifacts" / "production"


LEFT_OUT = (
    "Not run on this topology, to keep `make test` under its time budget: 2b (a triggerer killed while a job "
    "logs; the log reading does not depend on the executor or the database) and 8 (invalid configurations: "
    "refused at parse time or on the first try, before any job, whatever runs the task)."
)


@pytest.fixture(scope="module")
def notes() -> list[str]:
    return [LEFT_OUT]


@pytest.fixture(scope="module")
def rows(notes: list[str]) -> Iterator[list[Row]]:
    yield from collect_rows(PRODUCTION, ARTIFACTS / "stack" / "scheduler.log", notes)


@pytest.fixture(scope="module")
def stack(rows: list[Row], notes: list[str]) -> Iterator[ProductionStack]:
    with ProductionStack(project_dir=PROJECT_DIR, workdir=ARTIFACTS / "stack") as production:
        yield production
    notes.extend(production.crash_notes())


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
    row = _four_shards_none_stopped(
        stack,
        "2c. one of two triggerers SIGKILLed while 4 jobs queue; the other takes over",
        "SIGKILL triggerer-1, not restarted until the run ends",
        dag_id,
        run_id,
    )
    campaign._record(rows, row)


def test_a_stalled_triggerer_whose_triggers_fired_elsewhere_leaves_their_jobs_running(
    stack: ProductionStack, rows: list[Row]
) -> None:
    """A triggerer stalls (SIGSTOP) past the health-check threshold; the other takes its triggers over and fires
    their selection events, and the tasks wait in the queue for a worker. When the stalled triggerer wakes, Airflow
    calls on_kill on its copies of triggers that are gone: the tasks are queued then, not ended by anyone, so
    their jobs must go on (a stop here made a retry launch a second job)."""
    import sqlalchemy

    dag_id = "fault_triggerer_stalled"
    database = sqlalchemy.create_engine(stack.services.database_url)
    stack.set_capacity({LONG_RUNNING: 0})
    try:
        stack.pause_component("triggerer-2")  # every trigger of the run starts on triggerer-1
        run_id = stack.trigger(dag_id)
        wait_for(lambda: campaign._all_deferred(stack, dag_id, run_id, 4), 180, "four deferred shards")
        wait_for(lambda: campaign._queued_jobs(stack, dag_id, run_id) == 4, 60, "four queued jobs")
        first = wait_for(lambda: _triggerers_assigned(database, dag_id, run_id, 4), 60, "the four on triggerer-1")
        assert len(first) == 1, f"the four triggers are not all on one triggerer: {first}"
        for component in ("celery-worker-1", "celery-worker-2", "triggerer-1"):
            stack.pause_component(component)
        stack.resume_component("triggerer-2")

        def moved() -> bool:  # triggerer-2 takes the four over once triggerer-1's heartbeat is 10 s old
            now = _triggerers_assigned(database, dag_id, run_id, 4)
            return bool(now) and not now & first

        wait_for(moved, 120, "the four on triggerer-2")
        stack.set_capacity({LONG_RUNNING: 4})
        # The selections fire on triggerer-2; the tasks wait for a worker (the executor queues 3, schedules 1).
        wait_for(lambda: set(campaign._states(stack, dag_id, run_id).values()) <= RESUMED, 120, "four resumed tasks")
        # triggerer-1's copies must not see the selection themselves before Airflow cancels them.
        stack.set_faults(slow_operations={"DescribeTrainingJob": 60_000, "ListTrainingJobs": 60_000})
        running = _running_jobs(stack, dag_id, run_id)
        stack.resume_component("triggerer-1")
        wait_for(
            lambda: _triggers_told_on_kill(stack, dag_id, run_id) >= 4, 120, "on_kill on triggerer-1's four copies"
        )
        stack.set_faults()
        for component in ("celery-worker-1", "celery-worker-2"):
            stack.resume_component(component)
        waiting = {"deferred", "success"}
        wait_for(lambda: set(campaign._states(stack, dag_id, run_id).values()) <= waiting, 180, "four shards waiting")
        control(stack.emulator_url, "advance", {"seconds": 9000})  # the jobs' 150 s, at once
        stack.wait_run_done(dag_id, run_id)
    finally:  # one failure stays one: the scenarios after this one get the stack as it was
        for component in ("triggerer-1", "triggerer-2", "celery-worker-1", "celery-worker-2"):
            stack.resume_component(component)
        stack.set_faults()
        stack.set_capacity({LONG_RUNNING: 32})  # campaign.yaml's
        database.dispose()
    row = _four_shards_none_stopped(
        stack,
        "2d. a stalled triggerer wakes after the other fired its triggers' events",
        "SIGSTOP triggerer-1 and both workers; triggerer-2 fires the selections; triggerer-1 wakes",
        dag_id,
        run_id,
    )
    if running != 4:
        row.problems.append(f"{running} of 4 jobs running when triggerer-1 woke: the scenario tested nothing")
    campaign._record(rows, row)


def _four_shards_none_stopped(stack: ProductionStack, scenario: str, faults: str, dag_id: str, run_id: str) -> Row:
    """The audit of a run of four shards that must all succeed, each on one job that no one stopped: a
    triggerer handing its triggers over is not a user ending their tasks."""
    row = audit(stack, scenario, faults, Expect(dag_id, run_id, {f"train[{i}]": "success" for i in range(4)}))
    stopped = [
        job["name"] for jobs in jobs_of(stack, dag_id, run_id).values() for job in jobs if job["status"] == "Stopped"
    ]
    if stopped:
        row.problems.append(f"jobs stopped although no user ended their tasks: {stopped}")
    return row


LONG_RUNNING = "ml.g5.8xlarge"  # 150 s per job in campaign.yaml
RESUMED = {"scheduled", "queued"}


def _triggerers_assigned(database: Engine, dag_id: str, run_id: str, count: int) -> set[int]:
    """The triggerers (job ids) the run's ``count`` deferred tasks' triggers are assigned to (read from the
    metadata database); empty until every one of them is assigned."""
    import sqlalchemy

    with database.connect() as connection:
        assigned = (
            connection.execute(
                sqlalchemy.text(
                    "SELECT trigger.triggerer_id FROM task_instance"
                    " JOIN trigger ON task_instance.trigger_id = trigger.id"
                    " WHERE task_instance.dag_id = :dag_id AND task_instance.run_id = :run_id"
                ),
                {"dag_id": dag_id, "run_id": run_id},
            )
            .scalars()
            .all()
        )
    return set(assigned) if len(assigned) == count and None not in assigned else set()


def _running_jobs(stack: ProductionStack, dag_id: str, run_id: str) -> int:
    return sum(
        job["status"] == "InProgress" and job["selected"] is not None
        for jobs in jobs_of(stack, dag_id, run_id).values()
        for job in jobs
    )


def _triggers_told_on_kill(stack: ProductionStack, dag_id: str, run_id: str) -> int:
    """How many of the run's trigger logs (shipped to S3 when a trigger ends) say Airflow invoked its on_kill."""
    run = f"dag_id={dag_id}/run_id={run_id}"
    return sum(
        "invoking on_kill" in path.read_text(errors="replace")
        for folder in stack.log_folders()
        for path in (folder / run).rglob("*.trigger.*.log")
    )


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
    """Two tasks waiting in their worker slots (deferrable=False) lose their Celery workers, task processes
    included. The scheduler times their heartbeats out. The one with retries runs again on a live worker,
    reattaches to its running job and waits it out: one job, never stopped. The one without retries fails
    for good, and its job, which nothing would watch again, is stopped (the listener, in the scheduler)."""
    retried, for_good = "fault_worker_lost", "fault_worker_lost_for_good"
    runs = {dag_id: stack.trigger(dag_id) for dag_id in (retried, for_good)}

    def jobs_running() -> bool:
        jobs = [campaign._job(stack, dag_id, run_id, "blocking_wait") for dag_id, run_id in runs.items()]
        return all(job and job["secondary_status"] == "Training" for job in jobs)

    wait_for(jobs_running, 180, "both jobs to run while their tasks wait in worker slots")
    lost = {stack.component_running(stack.task_instances(d, r)[0]["id"]) for d, r in runs.items()}
    for worker in sorted(lost):
        stack.kill_component(worker)
    wait_for(
        lambda: stack.task_instances(for_good, runs[for_good])[0]["state"] == "failed",
        240,
        "the scheduler to fail the task without retries",
    )
    for worker in sorted(lost):
        stack.start_component(worker)
    for dag_id, run_id in runs.items():
        stack.wait_run_done(dag_id, run_id, timeout=300)
    row = audit(
        stack,
        "1b. Celery workers lost (each SIGKILLed with every process it started) while tasks wait on running jobs",
        f"SIGKILL to the workers running both tasks; heartbeat timeout {HEARTBEAT_TIMEOUT} s; one task has no retries",
        Expect(retried, runs[retried], {"blocking_wait": "success"}),
        Expect(for_good, runs[for_good], {"blocking_wait": "failed"}),
    )
    row.problems.extend(campaign._later_tries_problems(stack, retried, runs[retried], "blocking_wait"))
    for dag_id, wanted in ((retried, "Completed"), (for_good, "Stopped")):
        job = campaign._job(stack, dag_id, runs[dag_id], "blocking_wait", 0)
        if not job or job["status"] != wanted:
            row.problems.append(f"{dag_id}: the job should have ended {wanted}: {job and job['status']}")
    campaign._record(rows, row)


test_worker_killed_after_create_before_defer = campaign.test_worker_killed_after_create_before_defer
test_triggerer_killed_while_jobs_queue = campaign.test_triggerer_killed_while_jobs_queue
test_throttling_and_server_errors = campaign.test_throttling_and_server_errors
test_emulator_restarts_while_jobs_wait = campaign.test_emulator_restarts_while_jobs_wait
test_users_mark_failed_clear_and_fail_a_run = campaign.test_users_mark_failed_clear_and_fail_a_run
test_pending_bound_and_incompatible_fallback = campaign.test_pending_bound_and_incompatible_fallback
