"""The listener stops the job of a task a user set to a final state, or of one that failed for good while a
worker held its job (a lost worker's task, failed by the scheduler), and nothing else: a final failure it cannot
attribute (Airflow's deferral race) keeps the job running, and says so where the next try looks."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from typing import Any

import pytest
from airflow.utils.state import TaskInstanceState

from airflow_sm_prefs.platform import airflow_lines
from airflow_sm_prefs.sagemaker.tagging import KEPT_AFTER_TRY
from airflow_sm_prefs.surface import listener
from airflow_sm_prefs.task.attempts import BLOCKING, DEFERRED, FINISHED, KEPT, RESUMED, SUBMITTED, JobClaim
from tests.helpers import GPU_PAIR, FakeTI, boto_client, training_request

pytestmark = pytest.mark.emulator
HAS_STATE_STORE = airflow_lines.has_task_state_store()

SCHEDULED_TI = FakeTI(run_id="scheduled__2026-11-30T02:00:00+00:00")
RETRYING_TI = FakeTI(run_id="scheduled__2026-11-30T02:00:00+00:00", state=TaskInstanceState.UP_FOR_RETRY)
FAILED_TI = FakeTI(run_id="scheduled__2026-11-30T02:00:00+00:00", state=TaskInstanceState.FAILED, try_number=2)
# What Airflow 3.3.2's scheduler says of a deferred try whose trigger event re-queued it before the scheduler took
# the deferral's exit, and of a lost worker's: the same words.
RACE = (
    "Executor LocalExecutor(parallelism=4) reported that the task instance <TaskInstance: nightly.train "
    "scheduled__2026-11-30T02:00:00+00:00 [queued]> finished with state success, but the task instance's state "
    "attribute is queued."
)


class Backend:
    def __init__(self, claim: JobClaim) -> None:
        self.value = json.dumps(asdict(claim))
        self.scopes: list[Any] = []

    def get(self, scope: Any, key: str) -> str:
        self.scopes.append((scope, key))
        return self.value

    def set(self, scope: Any, key: str, value: str, *, expires_at: Any = None, session: Any = None) -> None:
        self.scopes.append((scope, key))
        self.value = value


@pytest.fixture
def queued_job(start_emulator, aws_connection, monkeypatch):
    if not HAS_STATE_STORE:
        pytest.skip("Airflow before 3.3 has no task state store for the listener to read")
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn_id = aws_connection(server)
    boto_client(server.endpoint_url).create_training_job(**training_request("marked", GPU_PAIR))

    def install(**changes: Any) -> Backend:
        claim = JobClaim("marked", "marked", 1, DEFERRED, 1, None, "training", conn_id, "us-east-1", True)
        backend = Backend(JobClaim(**{**asdict(claim), **changes}))
        monkeypatch.setattr("airflow.state.get_state_backend", lambda: backend)
        monkeypatch.setattr(listener, "_own_session", contextlib.nullcontext)  # the fake backend needs none
        return backend

    return server, install


def _status(server) -> str:
    return server.engine.job("training", "marked").status


def test_a_task_marked_failed_by_hand_has_its_job_stopped(queued_job):
    server, install = queued_job
    backend = install()
    listener.on_task_instance_failed(previous_state=None, task_instance=SCHEDULED_TI, error="set by hand")
    assert _status(server) in ("Stopping", "Stopped")
    scope, key = backend.scopes[0]
    assert (scope.dag_id, scope.task_id, scope.map_index, key) == ("nightly", "train", -1, "sm_prefs_job")


def test_marked_success_by_hand_stops_it_too(queued_job):
    server, install = queued_job
    install()
    listener.on_task_instance_success(previous_state=None, task_instance=SCHEDULED_TI)
    assert _status(server) in ("Stopping", "Stopped")


@pytest.mark.parametrize("phase", [BLOCKING, SUBMITTED])
def test_a_lost_workers_task_failed_for_good_has_its_job_stopped(queued_job, caplog, phase):
    """What the scheduler reports when a worker holding the job in its slot (a blocking wait, or between the
    create and the deferral) runs out of heartbeat and of retries."""
    server, install = queued_job
    install(phase=phase)
    listener.on_task_instance_failed(previous_state=TaskInstanceState.RUNNING, task_instance=FAILED_TI, error=RACE)
    assert _status(server) in ("Stopping", "Stopped")
    assert "failed with no retry left while its worker held the job (the worker was lost)" in caplog.text


@pytest.mark.parametrize("phase", [DEFERRED, RESUMED])
def test_a_final_failure_it_cannot_attribute_keeps_the_job_and_says_where_the_next_try_looks(queued_job, caplog, phase):
    """Airflow's deferral race fails a deferred task (or its resumed try) with the words of a lost worker: the job
    is healthy, so it runs on, the log says why, and the claim says the try after this one reattaches."""
    server, install = queued_job
    backend = install(phase=phase)
    listener.on_task_instance_failed(previous_state=TaskInstanceState.RUNNING, task_instance=FAILED_TI, error=RACE)
    assert _status(server) == "InProgress"
    assert "The job keeps running; clear the task to reattach to it" in caplog.text
    kept = JobClaim.from_stored(backend.value)
    assert kept is not None and (kept.phase, kept.kept_after_try, kept.job_name) == (KEPT, 2, "marked")


def test_a_kept_job_is_not_kept_twice_nor_stopped_by_a_later_final_failure(queued_job):
    server, install = queued_job
    install(phase=KEPT, kept_after_try=1)
    listener.on_task_instance_failed(previous_state=TaskInstanceState.RUNNING, task_instance=FAILED_TI, error=RACE)
    assert _status(server) == "InProgress"


def test_before_airflow_3_3_a_kept_job_is_tagged_with_the_try_that_failed(start_emulator, aws_connection, monkeypatch):
    """No task state store, and a new try starts with no XCom: the mark goes on the job itself, where the next
    try's claim is rebuilt from."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn_id = aws_connection(server)
    boto_client(server.endpoint_url).create_training_job(**training_request("marked", GPU_PAIR))
    claim = JobClaim("marked", "marked", 1, DEFERRED, 1, None, "training", conn_id, "us-east-1", True)
    _without_the_state_store(monkeypatch)
    monkeypatch.setattr(listener, "_claim_in_xcom", lambda task_instance, map_index: claim)
    listener.on_task_instance_failed(previous_state=TaskInstanceState.RUNNING, task_instance=FAILED_TI, error=RACE)
    job = server.engine.job("training", "marked")
    assert job.status == "InProgress"
    assert {tag["Key"]: tag["Value"] for tag in job.tags}[KEPT_AFTER_TRY] == "2"


@pytest.mark.parametrize(
    ("previous_state", "ti", "changes"),
    [
        (TaskInstanceState.RUNNING, RETRYING_TI, {}),  # a retry is to come: it reattaches to the job
        (TaskInstanceState.RUNNING, FAILED_TI, {"phase": FINISHED}),  # the task reported the job's outcome
        (None, SCHEDULED_TI, {"phase": FINISHED}),
        (None, SCHEDULED_TI, {"stop_on_kill": False}),
        (TaskInstanceState.RUNNING, FAILED_TI, {"stop_on_kill": False}),
        (None, SCHEDULED_TI, {"job_kind": None}),  # a claim written before claims named their job's kind
    ],
)
def test_the_listener_leaves_other_jobs_alone(queued_job, previous_state, ti, changes):
    server, install = queued_job
    install(**changes)
    listener.on_task_instance_failed(previous_state=previous_state, task_instance=ti, error=None)
    assert _status(server) == "InProgress"


def test_an_api_server_without_credentials_logs_and_lets_the_action_through(queued_job, caplog):
    server, install = queued_job
    install(aws_conn_id="no_such_connection")
    listener.on_task_instance_failed(previous_state=None, task_instance=SCHEDULED_TI, error="set by hand")
    assert _status(server) == "InProgress"
    assert "Could not stop SageMaker training job marked: Unable to locate credentials" in caplog.text


def _without_the_state_store(monkeypatch):
    monkeypatch.setattr(airflow_lines, "has_task_state_store", lambda: False)


def test_before_airflow_3_3_the_claim_comes_from_the_tries_xcom(start_emulator, aws_connection, monkeypatch):
    """No task state store: the listener reads the claim the try wrote in its XCom (the metadata database;
    here the query's answer stands in for it, the platform matrix's fault scenario reads the real one)."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn_id = aws_connection(server)
    boto_client(server.endpoint_url).create_training_job(**training_request("marked", GPU_PAIR))
    claim = JobClaim("marked", "marked", 1, DEFERRED, 1, None, "training", conn_id, "us-east-1", True)
    asked = []

    def claim_in_xcom(task_instance, map_index):
        asked.append((task_instance.dag_id, task_instance.task_id, task_instance.run_id, map_index))
        return claim

    _without_the_state_store(monkeypatch)
    monkeypatch.setattr(listener, "_claim_in_xcom", claim_in_xcom)
    listener.on_task_instance_failed(previous_state=None, task_instance=SCHEDULED_TI, error="set by hand")
    assert _status(server) in ("Stopping", "Stopped")
    assert asked == [("nightly", "train", SCHEDULED_TI.run_id, -1)]


def test_a_claim_that_cannot_be_read_lets_the_action_through(monkeypatch, caplog):
    def unreadable(task_instance, map_index):
        raise RuntimeError("no metadata database here")

    _without_the_state_store(monkeypatch)
    monkeypatch.setattr(listener, "_claim_in_xcom", unreadable)
    listener.on_task_instance_failed(previous_state=None, task_instance=SCHEDULED_TI, error="set by hand")
    listener.on_task_instance_success(previous_state=None, task_instance=SCHEDULED_TI)
    assert "Could not read the SageMaker job claimed by train" in caplog.text


def _run_with_two_claims(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn_id = aws_connection(server)
    client = boto_client(server.endpoint_url)
    claims = []
    for task_id, phase in (("train", DEFERRED), ("evaluate", FINISHED)):
        client.create_training_job(**training_request(task_id, GPU_PAIR))
        claims.append((task_id, JobClaim(task_id, task_id, 1, phase, 1, None, "training", conn_id, "us-east-1", True)))
    asked = []

    def claims_in_run_xcoms(dag_id, run_id):
        asked.append((dag_id, run_id))
        return claims

    monkeypatch.setattr(listener, "_claims_in_run_xcoms", claims_in_run_xcoms)
    return server, asked


class FakeRun:
    dag_id = "nightly"
    run_id = SCHEDULED_TI.run_id


def test_before_airflow_3_3_a_failed_run_stops_the_jobs_its_tasks_claimed(start_emulator, aws_connection, monkeypatch):
    """Before 3.3 Airflow reports a run marked failed, not its task instances: the run's XCom claims are read."""
    server, asked = _run_with_two_claims(start_emulator, aws_connection, monkeypatch)
    _without_the_state_store(monkeypatch)
    listener.on_dag_run_failed(dag_run=FakeRun(), msg="")  # what 3.1 and 3.2's API says for a run marked failed
    assert asked == [("nightly", FakeRun.run_id)]
    assert server.engine.job("training", "train").status in ("Stopping", "Stopped")
    assert server.engine.job("training", "evaluate").status == "InProgress"  # its claim says the job ended


def test_from_airflow_3_3_a_failed_run_is_left_to_its_task_instances(start_emulator, aws_connection, monkeypatch):
    server, asked = _run_with_two_claims(start_emulator, aws_connection, monkeypatch)
    monkeypatch.setattr(airflow_lines, "has_task_state_store", lambda: True)
    listener.on_dag_run_failed(dag_run=FakeRun(), msg="marked failed")
    assert asked == []
    assert server.engine.job("training", "train").status == "InProgress"


def test_before_airflow_3_3_a_run_failed_by_a_task_is_left_to_that_tasks_own_report(
    start_emulator, aws_connection, monkeypatch
):
    """The scheduler fails a run because a task failed (``task_failure``): that failure was reported on its own
    and judged there; stopping the run's unfinished claims here would stop the job the race left healthy."""
    server, asked = _run_with_two_claims(start_emulator, aws_connection, monkeypatch)
    _without_the_state_store(monkeypatch)
    listener.on_dag_run_failed(dag_run=FakeRun(), msg="task_failure")
    assert asked == []
    assert server.engine.job("training", "train").status == "InProgress"


def test_a_run_whose_claims_cannot_be_read_lets_the_action_through(monkeypatch, caplog):
    def unreadable(dag_id, run_id):
        raise RuntimeError("no metadata database here")

    _without_the_state_store(monkeypatch)
    monkeypatch.setattr(listener, "_claims_in_run_xcoms", unreadable)
    listener.on_dag_run_failed(dag_run=FakeRun(), msg="marked failed")
    assert f"Could not read the SageMaker jobs claimed in run {FakeRun.run_id}" in caplog.text
