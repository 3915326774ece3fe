"""The fault campaign's scenarios on the production topology: PostgreSQL, Redis, CeleryExecutor, two Celery
workers and two triggerers (tests/production/stack.py). The scenarios are the campaign's own functions, run
against this module's stack; the audit is the same (0 duplicates, 0 orphans, every choice recorded). Its
results fill the PostgreSQL + Celery column of the reliability report (tests/faults/report.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from sm_prefs_devkit.local_stack import control, wait_for
from tests.faults import test_campaign as campaign
from tests.faults.audit import Expect, Row, audit, jobs_of
from tests.faults.report import PRODUCTION, collect_rows
from tests.faults.stack import ARTIFACTS_DIR, PROJECT_DIR
from tests.production.stack import HEARTBEAT_TIMEOUT, SHARED_BUCKET, SHARED_PREFIX, ProductionStack

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

pytestmark = pytest.mark.airflow

ARTIFACTS = ARTIFACTS_DIR / "production"


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
    """A triggerer stalls (SIGSTOP) past the health-check threshold; the other takes its triggers over and sees the
    selections (announced without an event, so the tasks stay deferred). When the stalled triggerer wakes, Airflow
    3.3 calls on_kill on its copies of triggers it no longer owns: the tasks are deferred then, not ended by anyone,
    so their jobs must go on (a stop here made a retry launch a second job)."""
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
        # Assigned is not yet running: a triggerer stalled between taking the rows and starting the triggers
        # never runs them, so it has no copies for Airflow to call on_kill on when it wakes.
        wait_for(lambda: _triggers_started(stack, "triggerer-1", dag_id, run_id) == 4, 60, "the four running")
        for component in ("celery-worker-1", "celery-worker-2", "triggerer-1"):
            stack.pause_component(component)
        stack.resume_component("triggerer-2")

        def moved() -> bool:  # triggerer-2 takes the four over once triggerer-1's heartbeat is 10 s old
            now = _triggerers_assigned(database, dag_id, run_id, 4)
            return bool(now) and not now & first

        wait_for(moved, 120, "the four on triggerer-2")
        wait_for(lambda: _triggers_started(stack, "triggerer-2", dag_id, run_id) == 4, 60, "the four on triggerer-2")
        stack.set_capacity({LONG_RUNNING: 4})
        # triggerer-2's copies see the selections and announce them; the tasks stay deferred.
        wait_for(lambda: _running_jobs(stack, dag_id, run_id) == 4, 60, "four running jobs")
        wait_for(lambda: _selections_announced(stack, dag_id, run_id) == 4, 60, "four selections announced")
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
        "2d. a stalled triggerer wakes after the other took its triggers over",
        "SIGSTOP triggerer-1 and both workers; triggerer-2 takes the triggers over and announces the selections; "
        "triggerer-1 wakes",
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


def _triggers_started(stack: ProductionStack, host: str, dag_id: str, run_id: str) -> int:
    """How many of the run's triggers ``host``'s triggerer has started: their log, on that host until the
    trigger ends, says so."""
    run = stack.home_of(host) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
    return sum(" starting" in path.read_text(errors="replace") for path in run.rglob("*.trigger.*.log"))


def _running_jobs(stack: ProductionStack, dag_id: str, run_id: str) -> int:
    return sum(
        job["status"] == "InProgress" and job["selected"] is not None
        for jobs in jobs_of(stack, dag_id, run_id).values()
        for job in jobs
    )


def _selections_announced(stack: ProductionStack, dag_id: str, run_id: str) -> int:
    return sum(bool(stack.xcom(dag_id, run_id, "train", "selection", map_index)) for map_index in range(4))


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


Finding = tuple[str, str, str]  # check, status, detail and fix


def _sm_prefs(stack: ProductionStack, host: str, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``airflow-sm-prefs`` on one component's host, with that host's settings (and ``env`` over them)."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_sm_prefs.surface.cli", *argv],
        env={**stack.component_env(host), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _doctor(stack: ProductionStack, host: str, **env: str) -> tuple[int, list[Finding]]:
    done = _sm_prefs(stack, host, "doctor", "--format", "json", **env)
    assert done.stdout.strip().startswith("["), f"{host}: {done.stdout[-1000:]}\n{done.stderr[-2000:]}"
    findings = [(f["check"], f["status"], f"{f['detail']}; {f['fix']}") for f in json.loads(done.stdout)]
    return done.returncode, findings


def _failed(findings: list[Finding]) -> dict[str, str]:
    return {check: said for check, status, said in findings if status == "fail"}


def _kept_on(stack: ProductionStack) -> dict[str, list[str]]:
    """The ledger entries each host keeps because the shared store refused them."""
    kept = {
        host.name: sorted(p.name for p in (host / "sm_prefs" / "ledger-spool").glob("*/*.json"))
        for host in stack.hosts()
    }
    return {host: names for host, names in kept.items() if names}


def test_the_shared_store_down_a_wrong_connection_and_a_denied_action(stack: ProductionStack, rows: list[Row]) -> None:
    """``doctor`` on every component says nothing fails; with the shared store refusing every connection, with
    ``storage_conn_id`` naming a connection that does not exist and with a SageMaker action denied, it fails
    with the fix. Tasks whose jobs end while the store is down end as their jobs did, on their first try; their
    ledger entries are kept on their workers' hosts, and ``ledger backfill`` there sends them once the store is
    back: the tasks' own entries, none rebuilt."""
    for host in stack.airflow_components:
        code, findings = _doctor(stack, host)
        assert code == 0 and _failed(findings) == {}, (host, findings)
        assert any(check == "store" and status == "ok" for check, status, _ in findings), (host, findings)

    store = f"s3://{SHARED_BUCKET}/{SHARED_PREFIX}"
    stack.store.fault = "reset"
    code, findings = _doctor(stack, "celery-worker-1")
    assert code == 1 and set(_failed(findings)) == {"store"}, findings
    statuses = {(check, status) for check, status, _ in findings}
    # What the store holds is not read through a store that just failed: no second wait, no line saying "ok".
    assert {("prices", "skip"), ("registry", "skip")} <= statuses, findings
    said = _failed(findings)["store"]  # refused or reset, as the proxy's close meets the client
    assert store in said and "check the endpoint in the store's connection" in said, findings
    stack.store.fault = None
    code, findings = _doctor(stack, "triggerer-1", AIRFLOW__SM_PREFS__STORAGE_CONN_ID="no_such_store")
    assert code == 1 and "store" in _failed(findings), findings
    assert "no_such_store" in _failed(findings)["store"] and "storage_conn_id" in _failed(findings)["store"], findings
    stack.set_faults(deny=["DescribeTrainingJob"])
    try:
        code, findings = _doctor(stack, "api-server")
    finally:
        stack.set_faults()
    assert code == 1 and set(_failed(findings)) == {"sagemaker"}, findings
    assert "DescribeTrainingJob" in _failed(findings)["sagemaker"], findings

    dag_id = "fault_store_down"
    stack.store.fault = "reset"
    try:
        run_id = stack.trigger(dag_id)
        stack.wait_run_done(dag_id, run_id)
        kept = _kept_on(stack)
    finally:
        stack.store.fault = None
    row = audit(
        stack,
        "9. the shared store refuses every connection while tasks wait and their jobs end",
        "the store's proxy closes every connection at once; SageMaker answers; a deferred and a blocking wait",
        Expect(dag_id, run_id, {"deferred": "success", "blocking": "success"}),
    )
    jobs = {task: campaign._job(stack, dag_id, run_id, task) for task in ("deferred", "blocking")}
    for task in jobs:
        tries = stack.task_logs(dag_id, run_id, task)
        if len(tries) != 1:
            row.problems.append(f"{task} ran {len(tries)} tries: the store's failure cost the task a try")
        elif "kept on this host" not in tries[0]:
            row.problems.append(f"{task}'s log does not say its ledger entry was kept: {tries[0][-600:]!r}")
    names = sorted(f"{job['name']}.us-east-1.json" for job in jobs.values() if job)
    if sorted(name for names_kept in kept.values() for name in names_kept) != names:
        row.problems.append(f"the workers' hosts should keep {names}; they keep {kept}")

    for host in kept:
        sent = _sm_prefs(stack, host, "ledger", "backfill", "--since", "1d")
        said = sent.stdout + sent.stderr
        assert sent.returncode == 0 and "kept while the store failed: sent" in sent.stdout, (host, said)
    ledger_folder = stack.shared_copy(f"ledger/{dag_id}")
    recorded = {path.name: json.loads(path.read_text()) for path in ledger_folder.glob("*.json")}
    if sorted(recorded) != names or any(entry["source"] != "task" for entry in recorded.values()):
        row.problems.append(f"the store should hold the tasks' own entries {names}; it holds {recorded}")
    if _kept_on(stack):
        row.problems.append(f"entries still kept after the backfill: {_kept_on(stack)}")
    campaign._record(rows, row)
