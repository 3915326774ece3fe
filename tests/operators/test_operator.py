"""Operators driven directly (execute / execute_complete) against the emulator over HTTP."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, TaskDeferred

from airflow_sm_prefs import InstancePreference
from airflow_sm_prefs.request.preferences import RequestValidationError
from airflow_sm_prefs.surface.operators import (
    NoCapacityError,
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from airflow_sm_prefs.task.attempts import STATE_KEY, JobClaim
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, FakeTI, TaskLog, processing_request, training_request

pytestmark = pytest.mark.emulator


class FakeStore(dict):
    def set(self, key, value, retention=None):
        self[key] = value


def preflight_of(context: dict[str, Any]) -> dict[str, Any]:
    """What preflight decided about the list, as the task instance's claim keeps it for the record."""
    claim = JobClaim.from_stored(context["task_state_store"].get(STATE_KEY))
    assert claim is not None and claim.preflight is not None, "no claim holds preflight's decisions"
    return claim.preflight


def context(ti: FakeTI | None = None, store: FakeStore | None = None, claims: str = "store") -> dict[str, Any]:
    """``claims="sagemaker"``: Airflow before 3.3, whose context has no task_state_store."""
    if claims == "sagemaker":
        return {"ti": ti or FakeTI()}
    return {"ti": ti or FakeTI(), "task_state_store": FakeStore() if store is None else store}


# Where a later try finds the task instance's job: Airflow 3.3's task_state_store, or SageMaker itself.
CLAIMS = pytest.mark.parametrize("claims", ["store", "sagemaker"])


def training_operator(conn_id: str, **kwargs: Any) -> SageMakerPreferenceTrainingOperator:
    kwargs.setdefault("config", training_request("", None) | {"TrainingJobName": "eval-job"})
    kwargs.setdefault("preferences", GPU_PAIR)
    return SageMakerPreferenceTrainingOperator(task_id="train", aws_conn_id=conn_id, check_interval=0.2, **kwargs)


def processing_operator(conn_id: str, **kwargs: Any) -> SageMakerPreferenceProcessingOperator:
    kwargs.setdefault("config", processing_request("prep-job", None))
    kwargs.setdefault("preferences", [("ml.g5.12xlarge", 1)])
    kwargs.setdefault("check_interval", 0.2)
    return SageMakerPreferenceProcessingOperator(task_id="prep", aws_conn_id=conn_id, **kwargs)


def _creates(server) -> int:
    return server.engine.calls["CreateTrainingJob"] + server.engine.calls["CreateProcessingJob"]


def test_static_invalid_preferences_fail_at_construction():
    with pytest.raises(RequestValidationError, match=r"preference #3 \(ml.p5.48xlarge\).*\[R4a\]"):
        SageMakerPreferenceTrainingOperator(
            task_id="bad",
            config=training_request("x", None),
            preferences=[("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1), ("ml.p5.48xlarge", 1)],
        )
    with pytest.raises(RequestValidationError, match=r"\[P10\]"):
        SageMakerPreferenceProcessingOperator(
            task_id="bad",
            config=processing_request("x", None)
            | {"StoppingCondition": {"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 3600}},
            preferences=["ml.m5.xlarge"],
            max_pending=None,
        )


def test_invalid_rendered_values_fail_before_any_call(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage")
    operator = training_operator(aws_connection(server), preferences="{{ params.prefs }}")
    operator.preferences = '[{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}, {"InstanceType": "ml.bogus.x"}]'
    with pytest.raises(AirflowFailException, match="no SageMaker job was created"):
        operator.execute(context())
    operator.preferences = '[{"InstanceType": "ml.p5.48xlarg", "InstanceCount": 1}]'
    with pytest.raises(AirflowFailException, match=r"not a SageMaker training instance type \[R19\]"):
        operator.execute(context())
    assert _creates(server) == 0


def test_verify_and_botocore_config_reach_the_trigger_and_the_claim(start_emulator, aws_connection):
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    server = start_emulator("all-busy-then-free")
    settings = {"connect_timeout": 7, "retries": {"mode": "standard", "max_attempts": 4}}
    operator = training_operator(aws_connection(server), verify=False, botocore_config=settings)
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(ctx)
    trigger = deferred.value.trigger
    assert (trigger.connection.verify, trigger.connection.botocore_config) == (False, settings)
    rebuilt = type(trigger)(**trigger.serialize()[1])
    assert rebuilt.connection == trigger.connection, "they survive the trip to the triggerer"
    claim = ctx["task_state_store"][STATE_KEY]
    assert (claim["verify"], claim["botocore_config"]) == (False, settings)  # the listener's stop uses them too
    client = SageMakerPreferenceHook(**trigger.connection.hook_arguments()).conn
    assert (client.meta.config.connect_timeout, client.meta.config.retries["mode"]) == (7, "standard")


def test_templated_counts_are_cast_and_the_job_defers_once_for_the_whole_wait(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    operator = training_operator(
        aws_connection(server), preferences=[{"instance_type": "ml.p5.48xlarge", "instance_count": "{{ params.n }}"}]
    )
    operator.preferences = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": "2"}]  # as Jinja renders it
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(ctx)
    trigger = deferred.value.trigger
    assert (trigger.wait_for, trigger.announce_selection, trigger.job_name) == ("completion", True, "eval-job")
    assert server.engine.job("training", "eval-job").candidates[0]["count"] == 2
    assert ctx["task_state_store"][STATE_KEY]["phase"] == "deferred"
    links = {k for k in ctx["ti"].xcoms if k.endswith("_link")}
    assert links == {"sm_prefs_console_link", "sm_prefs_logs_link"}, "links exist before the job leaves the queue"


def test_jobs_carry_the_task_instance_tags_beside_the_users(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    config = training_request("", None) | {
        "TrainingJobName": "tagged",
        "Tags": [{"Key": "team", "Value": "eval"}, {"Key": "airflow:task_id", "Value": "kept"}],
    }
    with pytest.raises(TaskDeferred):
        training_operator(aws_connection(server), config=config).execute(
            context(FakeTI(run_id="scheduled__2026-11-30T02:00:00+00:00", map_index=3))
        )
    (job,) = control(server.endpoint_url, "jobs")["jobs"]
    assert job["tags"] == {
        "team": "eval",
        "airflow:task_id": "kept",
        "airflow:dag_id": "nightly",
        "airflow:run_id": "scheduled__2026-11-30T02:00:00+00:00",
        "airflow:map_index": "3",
        "airflow:try_number": "1",
    }


def _send_as_the_task_runner_would(deferred: TaskDeferred) -> None:
    """Encode the deferral exactly as the Task SDK sends it to the supervisor (msgpack, serde kwargs)."""
    import structlog
    from airflow.sdk.execution_time.comms import _RequestFrame
    from airflow.sdk.execution_time.task_runner import _defer_task

    message, state = _defer_task(deferred, FakeTI(), structlog.get_logger())
    assert state == "deferred"
    assert _RequestFrame(id=1, body=message).as_bytes()


def test_deferral_survives_the_task_sdk_channel(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    with pytest.raises(TaskDeferred) as deferred:
        training_operator(aws_connection(server), max_pending=pendulum.duration(hours=2)).execute(context())
    _send_as_the_task_runner_would(deferred.value)


def test_selection_is_announced_then_the_wait_continues(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage")
    operator = training_operator(aws_connection(server))
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(ctx)
    selection = ctx["ti"].xcoms["selection"]
    assert (selection["selected_instance_type"], selection["selected_rank"], selection["fell_back"]) == (
        "ml.p4d.24xlarge",
        1,
        True,
    )
    assert deferred.value.trigger.wait_for == "completion"


def test_completion_returns_the_flat_record(start_emulator, aws_connection, monkeypatch):
    from airflow_sm_prefs.preflight import registry

    server = start_emulator("gpu-shortage")
    operator = training_operator(aws_connection(server))
    ctx = context()
    with pytest.raises(TaskDeferred):
        operator.execute(ctx)
    # Resumed, the task judges no preflight argument again but the certification its record names: a cost cap,
    # a deadline or a quota setting was judged before the job was created, and the job exists.
    judged: list[str] = []
    for check in registry.CHECKS:
        monkeypatch.setattr(
            check,
            "from_arguments",
            classmethod(lambda cls, *a, _f=check.from_arguments: judged.append(cls.__name__) or _f(*a)),
        )
    description = server.engine.describe("training", "eval-job")
    control(server.endpoint_url, "advance", {"seconds": 5000})
    description = server.engine.describe("training", "eval-job")
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    result = operator.execute_complete(
        ctx, {"status": "finished", "job_name": "eval-job", "description": jsonable(description), "announced": True}
    )
    assert result["status"] == "Completed" and result["selected_rank"] == 1
    assert judged == ["CertifiedOnly"]
    assert (
        result["selected_instance_count"] == 2 and result["billable_instance_seconds"] == 2 * result["billable_seconds"]
    )
    assert dt.datetime.fromisoformat(result["ended_at"]) > dt.datetime.fromisoformat(result["started_at"])


def test_blocking_mode_runs_to_completion(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage")
    control(server.endpoint_url, "advance", {"seconds": 0})
    operator = training_operator(aws_connection(server), deferrable=False)
    result = operator.execute(context())
    assert (result["status"], result["selected_instance_type"]) == ("Completed", "ml.p4d.24xlarge")


def test_a_retry_reattaches_instead_of_launching_again(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store))
    store[STATE_KEY]["phase"] = "submitted"  # as if the worker died before deferring
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2), store))
    assert deferred.value.trigger.job_name == "eval-job"
    assert _creates(server) == 1


def test_without_a_state_store_the_job_is_found_in_sagemaker_and_the_name_still_guards(
    start_emulator, aws_connection, monkeypatch
):
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    server = start_emulator("gpu-shortage", clock_stopped=True)
    config = training_request("", None)
    config.pop("TrainingJobName")
    operator = training_operator(aws_connection(server), config=config)
    for _ in range(2):
        with pytest.raises(TaskDeferred):
            operator.execute({"ti": FakeTI()})
    assert len(server.engine.jobs) == 1 and _creates(server) == 1, "the listing found the job: no create"
    # A listing that lags the create (real SageMaker's lists are eventually consistent) misses the job: the
    # deterministic name makes the create meet ResourceInUse, and the try reattaches.
    monkeypatch.setattr(SageMakerPreferenceHook, "job_names_containing", lambda self, kind, text: [])
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({"ti": FakeTI()})
    assert len(server.engine.jobs) == 1 and _creates(server) == 2
    assert deferred.value.trigger.job_name == next(iter(server.engine.jobs.values())).name


def test_without_a_state_store_or_the_jobs_tags_a_clear_is_taken_for_a_retry(start_emulator, aws_connection):
    """Without sagemaker:ListTags the try that created the job is unknown: reattach, never launch again."""
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), claims="sagemaker"))
    control(server.endpoint_url, "faults", {"deny": ["ListTags"]})
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2, max_tries=1), claims="sagemaker"))  # cleared, in truth
    assert deferred.value.trigger.job_name == "eval-job" and _creates(server) == 1
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] == "InProgress"


@CLAIMS
def test_a_completed_job_is_not_launched_again(start_emulator, aws_connection, claims):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store, claims))
    control(server.endpoint_url, "advance", {"seconds": 5000})
    result = operator.execute(context(FakeTI(try_number=2), store, claims))
    assert result["status"] == "Completed" and _creates(server) == 1


@CLAIMS
def test_clearing_a_successful_task_runs_a_new_job(start_emulator, aws_connection, claims):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    ctx = context(FakeTI(try_number=1), store, claims)
    with pytest.raises(TaskDeferred):
        operator.execute(ctx)
    control(server.endpoint_url, "advance", {"seconds": 5000})
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    done = jsonable(server.engine.describe("training", "eval-job"))
    operator.execute_complete(
        ctx, {"status": "finished", "job_name": "eval-job", "description": done, "announced": True}
    )
    assert claims == "sagemaker" or store[STATE_KEY]["phase"] == "finished"
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(
            context(FakeTI(try_number=2, max_tries=1), store, claims)
        )  # the user cleared the successful task
    assert deferred.value.trigger.job_name == "eval-job-r2" and _creates(server) == 2


@CLAIMS
def test_after_a_failed_job_a_retry_starts_the_next_generation(start_emulator, aws_connection, claims):
    server = start_emulator("incompatible-fallback")
    preferences = [InstancePreference("ml.p5.48xlarge", 1), InstancePreference("ml.g5.48xlarge", 1)]
    operator = training_operator(aws_connection(server), preferences=preferences)
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store, claims))
    control(server.endpoint_url, "advance", {"seconds": 400})
    failed = server.engine.describe("training", "eval-job")
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    with pytest.raises(AirflowException, match="fallback type: SageMaker does not check"):
        operator.execute_complete(
            context(FakeTI(try_number=1), store, claims),
            {"status": "finished", "job_name": "eval-job", "description": jsonable(failed), "announced": True},
        )
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2), store, claims))
    assert deferred.value.trigger.job_name == "eval-job-r2"
    no_retry = training_operator(aws_connection(server), preferences=preferences, resubmit_after_failure=False)
    control(server.endpoint_url, "advance", {"seconds": 400})  # generation 2 fails the same way
    final_try = FakeTI(try_number=3)
    with pytest.raises(AirflowFailException, match=r"fallback type: .*eval-job-r2 ended Failed and resubmit_after"):
        no_retry.execute(context(final_try, store, claims))
    assert _creates(server) == 2
    assert (final_try.xcoms["record"]["job_name"], final_try.xcoms["record"]["status"]) == ("eval-job-r2", "Failed")


@CLAIMS
def test_a_clear_while_deferred_stops_the_old_job_and_starts_afresh(start_emulator, aws_connection, claims):
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store, claims))
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2, max_tries=1), store, claims))
    assert deferred.value.trigger.job_name == "eval-job-r2"
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] == "Stopping"


@CLAIMS
def test_an_event_about_an_earlier_generation_is_ignored(start_emulator, aws_connection, claims):
    """SQLite reuses a deleted trigger's id, so the old try's trigger can resume the new try with its event.
    Before Airflow 3.3 the resumed try finds the generation it follows in its own XCom."""
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store, claims))
    cleared = context(FakeTI(try_number=2, max_tries=1), store, claims)
    with pytest.raises(TaskDeferred):
        operator.execute(cleared)
    control(server.endpoint_url, "advance", {"seconds": 60})
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    stopped = jsonable(server.engine.describe("training", "eval-job"))
    assert stopped["TrainingJobStatus"] == "Stopped"
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute_complete(cleared, {"status": "finished", "job_name": "eval-job", "description": stopped})
    assert deferred.value.trigger.job_name == "eval-job-r2" and _creates(server) == 2


@CLAIMS
def test_a_retry_of_a_deferred_try_that_airflow_failed_reattaches(start_emulator, aws_connection, claims):
    """Airflow can fail a deferred try itself (apache/airflow#66374): that is a retry, not a user's clear."""
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server), retries=1)
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1, max_tries=1), store, claims))
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2, max_tries=1), store, claims))
    assert deferred.value.trigger.job_name == "eval-job" and _creates(server) == 1


class _ListenersView:
    """The metadata database as the scheduler's listener reads and writes the claim: the task's own store (3.3),
    or the try's XCom (before 3.3, where the listener tags the job instead of writing)."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def get(self, scope: Any, key: str) -> str:
        return json.dumps(self.store.get(key))

    def set(self, scope: Any, key: str, value: str, **_: Any) -> None:
        self.store.set(key, json.loads(value))


@CLAIMS
def test_a_clear_after_a_failure_the_listener_could_not_attribute_reattaches(
    start_emulator, aws_connection, claims, monkeypatch
):
    """Airflow's deferral race fails try 1 for good while its job runs: the listener keeps the job, and the user's
    clear reattaches to it instead of stopping it and launching another."""
    import contextlib

    from airflow.utils.state import TaskInstanceState

    from airflow_sm_prefs.platform import airflow_lines
    from airflow_sm_prefs.surface import listener

    if claims == "store" and not airflow_lines.has_task_state_store():
        pytest.skip("Airflow before 3.3 has no task state store")
    server = start_emulator("gpu-shortage", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    first = FakeTI(try_number=1)
    with pytest.raises(TaskDeferred):
        operator.execute(context(first, store, claims))
    if claims == "store":
        monkeypatch.setattr("airflow.state.get_state_backend", lambda: _ListenersView(store))
        monkeypatch.setattr(listener, "_own_session", contextlib.nullcontext)
    else:
        monkeypatch.setattr(airflow_lines, "has_task_state_store", lambda: False)
        monkeypatch.setattr(
            listener, "_claim_in_xcom", lambda ti, map_index: JobClaim.from_stored(first.xcoms[STATE_KEY])
        )
    failed = FakeTI(try_number=1, state=TaskInstanceState.FAILED)
    listener.on_task_instance_failed(previous_state=TaskInstanceState.QUEUED, task_instance=failed, error="race")
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] == "InProgress"
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(try_number=2, max_tries=1), store, claims))  # the user's clear
    assert deferred.value.trigger.job_name == "eval-job" and _creates(server) == 1
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] == "InProgress"


def test_no_capacity_error_names_every_preference_and_the_wait(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    never = [("ml.p4d.24xlarge", 1), ("ml.g5.48xlarge", 2)]
    operator = training_operator(aws_connection(server), preferences=never, max_pending=1800)
    ctx = context()
    with pytest.raises(TaskDeferred):
        operator.execute(ctx)
    control(server.endpoint_url, "advance", {"seconds": 1801})
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    stopped = jsonable(server.engine.describe("training", "eval-job"))
    with pytest.raises(NoCapacityError) as error:
        operator.execute_complete(ctx, {"status": "finished", "job_name": "eval-job", "description": stopped})
    message = str(error.value)
    assert "#1 ml.p4d.24xlarge x1, #2 ml.g5.48xlarge x2" in message and "waiting 30m0" in message
    assert ctx["ti"].xcoms["record"]["selected_instance_type"] is None


def test_processing_patience_is_enforced_by_the_operator(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    operator = processing_operator(aws_connection(server), max_pending=dt.timedelta(seconds=1), deferrable=False)
    ti = FakeTI(task_id="prep")
    with pytest.raises(NoCapacityError, match=r"#1 ml.g5.12xlarge x1; the job was stopped"):
        operator.execute(context(ti))
    assert server.engine.describe("processing", "prep-job")["ProcessingJobStatus"] in ("Stopping", "Stopped")
    assert ti.xcoms["record"]["status"] in ("Stopping", "Stopped"), "the record shows the job after the stop"
    assert ti.xcoms["record"]["selected_instance_type"] is None


def test_a_deferred_processing_job_past_its_patience_is_stopped_and_recorded(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    operator = processing_operator(aws_connection(server), max_pending=60)
    ti = FakeTI(task_id="prep")
    with pytest.raises(TaskDeferred):
        operator.execute(context(ti))
    event = {"status": "pending_timeout", "job_name": "prep-job", "description": {}, "announced": False}
    with pytest.raises(NoCapacityError, match=r"waited\) for any of: #1 ml.g5.12xlarge x1; the job was stopped"):
        operator.execute_complete(context(ti), event)
    assert server.engine.describe("processing", "prep-job")["ProcessingJobStatus"] in ("Stopping", "Stopped")
    assert ti.xcoms["record"]["job_name"] == "prep-job" and ti.xcoms["record"]["selected_instance_type"] is None


def test_processing_operator_selects_and_completes(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage")
    operator = processing_operator(
        aws_connection(server), preferences=[("ml.g6.12xlarge", 1), ("ml.g5.12xlarge", 2)], deferrable=False
    )
    ti = FakeTI(task_id="prep")
    result = operator.execute(context(ti))
    assert (result["job_kind"], result["selected_rank"], result["selected_instance_count"]) == ("processing", 1, 2)
    assert ti.xcoms["selection"]["selected_instance_type"] == "ml.g5.12xlarge"


def test_service_rejection_fails_without_retry(start_emulator, aws_connection):
    server = start_emulator("quota-short")
    # Lists ml.p4d.24xlarge x2 against a quota of 1; without the preflight, SageMaker is the one to refuse.
    operator = training_operator(aws_connection(server), quota_preflight=False)
    with pytest.raises(AirflowFailException, match="ResourceLimitExceeded"):
        operator.execute(context())
    assert len(server.engine.jobs) == 0


def test_blocking_on_kill_stops_the_job(start_emulator, aws_connection):
    import threading

    from sm_prefs_devkit.local_stack import wait_for

    server = start_emulator("all-busy-then-free")
    operator = training_operator(aws_connection(server), deferrable=False)
    store = FakeStore()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            operator.execute(context(store=store))
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_for(lambda: store.get(STATE_KEY, {}).get("phase") == "blocking", 30, "the blocking wait", every=0.05)
    operator.on_kill()  # what the task runner does on SIGTERM, from another thread than the wait
    worker.join(timeout=60)
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] in ("Stopping", "Stopped")
    # The wait saw its job stop and ended the task with it, never queued for capacity again.
    assert len(outcome) == 1 and isinstance(outcome[0], AirflowException), outcome
    assert "ended Stopped" in str(outcome[0])


def test_wait_timeout_stops_the_job_and_fails(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    operator = training_operator(
        aws_connection(server), preferences=[("ml.p4d.24xlarge", 1)], deferrable=False, wait_timeout=1
    )
    store, ti = FakeStore(), FakeTI()
    with pytest.raises(AirflowException, match="when wait_timeout expired; the job was stopped"):
        operator.execute(context(ti, store))
    assert server.engine.describe("training", "eval-job")["TrainingJobStatus"] in ("Stopping", "Stopped")
    assert ti.xcoms["record"]["job_name"] == "eval-job"
    assert store[STATE_KEY]["phase"] == "finished"


def test_a_failed_jobs_error_message_ends_with_its_last_log_lines(start_emulator, aws_connection):
    server = start_emulator("incompatible-fallback")
    preferences = [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 2)]
    operator = training_operator(aws_connection(server), preferences=preferences, deferrable=False)
    with pytest.raises(AirflowException) as failed:
        operator.execute(context())
    message = str(failed.value)
    head, _, tail = message.partition("\nLast ")
    assert "CUDA error" in head, "the reason comes first"
    lines = tail.split("\n")[1:]
    assert 0 < len(lines) <= 20 and all(line.startswith("[eval-job/algo-") for line in lines)
    assert "no kernel image is available" in lines[-1], "the job's own last words end the message"


def test_a_blocking_wait_shows_the_jobs_lines_once(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("gpu-shortage")
    operator = training_operator(aws_connection(server), deferrable=False)
    task_log = TaskLog()
    monkeypatch.setattr(type(operator), "log", property(lambda self: task_log), raising=False)
    operator.execute(context())
    shown = task_log.lines
    assert shown and len(shown) == len(set(shown))
    assert any("epoch 5/5" in line for line in shown) and shown[-1].endswith("Training job completed")


def test_stream_logs_off_reads_no_log(start_emulator, aws_connection):
    server = start_emulator("incompatible-fallback")
    preferences = [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 2)]
    operator = training_operator(aws_connection(server), preferences=preferences, deferrable=False, stream_logs=False)
    with pytest.raises(AirflowException) as failed:
        operator.execute(context())
    assert "Last" not in str(failed.value)
    assert not [name for name in server.engine.calls if name.startswith("Logs_")]


def test_a_reattaching_retry_shows_only_lines_written_from_then_on(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage", clock_stopped=True)  # "from now" is SageMaker's now
    operator = training_operator(aws_connection(server))
    store = FakeStore()
    with pytest.raises(TaskDeferred):
        operator.execute(context(FakeTI(try_number=1), store))
    control(server.endpoint_url, "advance", {"seconds": 120})  # running and logging
    second = FakeTI(try_number=2)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(second, store))
    cursor = deferred.value.trigger.log_cursor
    now_ms = control(server.endpoint_url, "health")["virtual_time"] * 1000
    assert cursor.to_json() == second.xcoms["sm_prefs_log_cursor"] and now_ms - 5000 < cursor.after <= now_ms
    assert deferred.value.trigger.stream_logs is True


def test_stream_logs_must_be_a_boolean():
    with pytest.raises(RequestValidationError, match="stream_logs must be True or False"):
        training_operator("aws_default", stream_logs="yes")


def test_every_ended_job_is_recorded_in_the_capacity_ledger(start_emulator, aws_connection):
    from airflow_sm_prefs.evidence import ledger_reading

    server = start_emulator("incompatible-fallback")
    failing = training_operator(
        aws_connection(server), preferences=[("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 2)], deferrable=False
    )
    with pytest.raises(AirflowException):
        failing.execute(context())
    (recorded,) = ledger_reading.read().entries
    assert (recorded["dag_id"], recorded["task_id"], recorded["job_name"]) == ("nightly", "train", "eval-job")
    assert (recorded["outcome"], recorded["selected_rank"], recorded["selected_instance_type"]) == (
        "failed_after_start",
        1,
        "ml.g5.48xlarge",
    )
    assert recorded["run_seconds"] and recorded["source"] == "task"


def test_a_ledger_that_cannot_be_written_never_fails_the_task(start_emulator, aws_connection, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{blocker}")
    server = start_emulator("gpu-shortage")
    result = training_operator(aws_connection(server), deferrable=False).execute(context())
    assert result["status"] == "Completed"


def test_a_deferred_task_times_out_fifteen_minutes_after_its_wait_would(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    operator = training_operator(aws_connection(server), wait_timeout=3600)
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context())
    margin = deferred.value.timeout - dt.timedelta(seconds=3600)
    assert dt.timedelta(minutes=14, seconds=50) < margin <= dt.timedelta(minutes=15)


def test_a_job_that_ended_before_its_selection_was_seen_still_announces_it(start_emulator, aws_connection):
    """The trigger could not announce the selection (or the job ended before it saw one): the selection XCom, the
    log line and the metric come when the task resumes, once."""
    from airflow_sm_prefs.sagemaker.job_view import jsonable

    server = start_emulator("all-busy-then-free", clock_stopped=True)
    operator = training_operator(aws_connection(server), preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 1)])
    ctx = context()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(ctx)
    assert deferred.value.trigger.announce_selection and "selection" not in ctx["ti"].xcoms
    control(server.endpoint_url, "advance", {"seconds": 5000})
    ended = jsonable(server.engine.describe("training", "eval-job"))
    assert ended["TrainingJobStatus"] == "Completed"
    event = {"status": "finished", "job_name": "eval-job", "description": ended, "announced": False}
    result = operator.execute_complete(ctx, event)
    selection = ctx["ti"].xcoms["selection"]
    assert (selection["selected_instance_type"], selection["selected_rank"]) == ("ml.p5.48xlarge", 0)
    assert result["selected_instance_type"] == "ml.p5.48xlarge"
    ctx["ti"].xcoms.pop("selection")
    operator.execute_complete(ctx, event | {"announced": True})
    assert "selection" not in ctx["ti"].xcoms, "an announced selection is not pushed again"


@pytest.mark.parametrize(
    ("conn_id", "said"),
    [
        ("aws_defualt", "the AWS connection 'aws_defualt' does not exist (did you mean 'aws_default'?), and this host"),
        ("no_region", "the AWS connection 'no_region' names no Region; set region_name in its extra"),
    ],
)
def test_a_connection_no_call_can_use_fails_once_in_one_line(start_emulator, monkeypatch, conn_id, said):
    """botocore's NoRegionError is a setting to correct: said in one line, never retried, no job created."""
    server = start_emulator("gpu-shortage")
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AIRFLOW_CONN_AWS_DEFUALT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv(
        "AIRFLOW_CONN_NO_REGION",
        json.dumps({"conn_type": "aws", "login": "t", "password": "t", "extra": {"endpoint_url": server.endpoint_url}}),
    )
    operator = training_operator(conn_id)
    with pytest.raises(AirflowFailException) as refused:
        operator.execute(context())
    assert str(refused.value).startswith(said) and str(refused.value).endswith("; no SageMaker job was created")
    assert "\n" not in str(refused.value)
    assert _creates(server) == 0
