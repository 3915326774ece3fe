"""The deferrable wait, run in an asyncio loop against the emulator over HTTP (aiobotocore via the hook)."""

from __future__ import annotations

import asyncio
import importlib

import pendulum
import pytest

from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger
from airflow_sm_prefs.wait.watcher import JobWatcher
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, processing_request, training_request, until_or_ended

pytestmark = pytest.mark.emulator


@pytest.fixture(autouse=True)
async def _close_watchers():
    yield
    await JobWatcher.close_all()


def _trigger(conn_id: str, name: str, **kwargs) -> SageMakerPreferenceJobTrigger:
    kwargs.setdefault("job_kind", "training")
    return SageMakerPreferenceJobTrigger(
        job_name=name, hook_kwargs={"aws_conn_id": conn_id, "region_name": "us-east-1"}, poll_interval=0.2, **kwargs
    )


async def _first_event(trigger: SageMakerPreferenceJobTrigger, timeout: float = 30.0) -> dict:
    event = await asyncio.wait_for(trigger.run().__anext__(), timeout)
    return event.payload


async def test_selection_event_carries_the_fallback(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("sel", GPU_PAIR))
    payload = await _first_event(_trigger(aws_connection(server), "sel", wait_for="selection"))
    assert payload["status"] == "selected"
    assert payload["description"]["ResourceConfig"]["SelectedInstanceType"] == "ml.p4d.24xlarge"
    assert isinstance(payload["description"]["CreationTime"], str), "event payloads are plain JSON"


async def test_completion_event(start_emulator, aws_connection):
    server = start_emulator("ample")
    boto_client(server.endpoint_url).create_training_job(**training_request("done", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 5000})
    payload = await _first_event(_trigger(aws_connection(server), "done"))
    assert (payload["status"], payload["description"]["TrainingJobStatus"]) == ("finished", "Completed")


async def test_failure_on_an_incompatible_fallback_is_a_finished_event(start_emulator, aws_connection):
    server = start_emulator("incompatible-fallback", clock_stopped=True)
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
    ]
    boto_client(server.endpoint_url).create_training_job(**training_request("cuda", preferences))
    trigger = _trigger(aws_connection(server), "cuda")
    task = asyncio.ensure_future(_first_event(trigger))
    await asyncio.sleep(0.5)
    control(server.endpoint_url, "advance", {"seconds": 400})
    payload = await task
    assert payload["description"]["TrainingJobStatus"] == "Failed"
    assert "no kernel image" in payload["description"]["FailureReason"]


async def test_service_pending_timeout_ends_the_wait_without_selection(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    never_freed = [
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
    ]
    request = training_request("patience", never_freed)
    request["StoppingCondition"]["MaxPendingTimeInSeconds"] = 1800
    boto_client(server.endpoint_url).create_training_job(**request)
    task = asyncio.ensure_future(_first_event(_trigger(aws_connection(server), "patience", wait_for="selection")))
    await asyncio.sleep(0.5)
    control(server.endpoint_url, "advance", {"seconds": 1801})
    payload = await task
    assert payload["status"] == "finished"
    assert payload["description"]["TrainingJobStatus"] == "Stopped"
    assert "SelectedInstanceType" not in payload["description"]["ResourceConfig"]


async def test_caller_side_pending_deadline_for_processing(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    preferences = [{"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}]
    boto_client(server.endpoint_url).create_processing_job(**processing_request("prep", preferences))
    soon = pendulum.now("UTC").add(seconds=1).isoformat()
    trigger = _trigger(
        aws_connection(server), "prep", job_kind="processing", wait_for="selection", pending_deadline=soon
    )
    payload = await _first_event(trigger)
    assert (payload["status"], payload["job_name"]) == ("pending_timeout", "prep")
    # The event carries the job as the trigger last saw it; a loaded machine may reach the deadline before the
    # first look, and then the task describes the job itself (TaskLife.resume).
    if payload["description"] is not None:
        assert payload["description"]["ProcessingJobStatus"] == "InProgress"


async def test_absolute_deadline(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("late", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "late", deadline=pendulum.now("UTC").add(seconds=1).isoformat())
    assert (await _first_event(trigger))["status"] == "timeout"


async def test_throttling_and_5xx_are_ridden_out(start_emulator, aws_connection):
    server = start_emulator("gpu-shortage", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("bumpy", GPU_PAIR))
    control(server.endpoint_url, "faults", {"throttle_rate": 0.5, "error_rate": 0.5})
    task = asyncio.ensure_future(_first_event(_trigger(aws_connection(server), "bumpy", wait_for="selection")))
    # Every call fails meanwhile (throttled or a 500): wait until two of them reached the emulator, however
    # long a busy machine takes to start the trigger.
    await until_or_ended(task, lambda: server.engine.calls["DescribeTrainingJob"] >= 2, "the trigger to ask SageMaker")
    assert not task.done(), "errors must not end the wait"
    control(server.endpoint_url, "faults", {})
    payload = await task
    assert payload["status"] == "selected"
    assert server.engine.calls["DescribeTrainingJob"] >= 3, "two refused, then one answered"


async def test_unobservable_job_is_an_error_event(start_emulator, aws_connection):
    server = start_emulator()
    payload = await _first_event(_trigger(aws_connection(server), "never-created"))
    assert payload["status"] == "error" and "ValidationException" in payload["message"]


def _task_in_state(monkeypatch, trigger: SageMakerPreferenceJobTrigger, state: str | None, map_index: int = -1):
    """The task's state as the Execution API answers the trigger ("unreadable": it cannot answer); returns the
    queries asked."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    trigger.task_instance = SimpleNamespace(dag_id="nightly", task_id="train", run_id="r1", map_index=map_index)
    key = "train" if map_index < 0 else f"train_{map_index}"
    asked = []

    def task_states(**query):
        asked.append(query)
        if state == "unreadable":
            raise ConnectionError("no Execution API")
        return {"r1": {key: state, "train_99": "failed"}}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(task_states))
    return asked


async def test_on_kill_stops_the_job_and_tolerates_a_finished_one(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("killed", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "killed")
    _task_in_state(monkeypatch, trigger, "failed")
    await trigger.on_kill()
    assert server.engine.describe("training", "killed")["TrainingJobStatus"] == "Stopping"
    control(server.endpoint_url, "advance", {"seconds": 60})
    await trigger.on_kill()  # already Stopped: logged, not raised
    assert server.engine.describe("training", "killed")["TrainingJobStatus"] == "Stopped"
    keep = _trigger(aws_connection(server), "killed", stop_on_kill=False)
    _task_in_state(monkeypatch, keep, "failed")
    await keep.on_kill()
    assert server.engine.calls["StopTrainingJob"] == 2


async def test_many_triggers_share_one_watcher_and_client(start_emulator, aws_connection):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    names = [f"many-{i}" for i in range(40)]
    for name in names:
        client.create_training_job(**training_request(name, GPU_PAIR))
    conn = aws_connection(server)
    payloads = await asyncio.gather(*(_first_event(_trigger(conn, n, wait_for="selection")) for n in names))
    # The shared rate limit spaces the first looks (40 jobs: about 6 s), and the emulator's clock runs on, so a
    # job may already have finished when it is first seen: that ends the wait too, and shows the selection.
    assert {p["status"] for p in payloads} <= {"selected", "finished"}
    chosen = {
        (
            p["description"]["ResourceConfig"]["SelectedInstanceType"],
            p["description"]["ResourceConfig"]["SelectedInstanceCount"],
        )
        for p in payloads
    }
    assert chosen == {(GPU_PAIR[0]["InstanceType"], GPU_PAIR[0]["InstanceCount"])}
    assert len(JobWatcher._by_loop[asyncio.get_running_loop()]) == 1


def test_serialize_round_trip():
    trigger = SageMakerPreferenceJobTrigger(
        job_name="j",
        job_kind="processing",
        hook_kwargs={"aws_conn_id": "c", "region_name": "r", "verify": False, "config": {"connect_timeout": 5}},
        wait_for="selection",
        deadline="2026-12-01T00:00:00+00:00",
        pending_deadline=None,
        poll_interval=5,
        stop_on_kill=False,
        known_state={"status": "InProgress", "secondary": "Pending", "selected": None, "last_modified": 1.0},
    )
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)


def test_serialize_carries_every_argument_the_constructor_takes():
    """A triggerer rebuilds the trigger from ``serialize()`` alone: an argument it drops (the log cursor, the
    known state) is lost on every restart or move. Each argument gets a value unlike its default."""
    import inspect

    given = {
        "job_name": "j",
        "job_kind": "processing",
        "hook_kwargs": {"aws_conn_id": "c", "region_name": "r", "verify": False, "config": {"connect_timeout": 5}},
        "wait_for": "selection",
        "deadline": "2026-12-01T00:00:00+00:00",
        "pending_deadline": "2026-11-30T12:00:00+00:00",
        "poll_interval": 7.5,
        "stop_on_kill": False,
        "known_state": {"status": "InProgress", "secondary": "Pending", "selected": None, "last_modified": 1.0},
        "stream_logs": True,
        "log_cursor": {"after": 5, "read_at_after": {"s/1": 2}},
        "mask_variables": [["api_token", False], ["service_secrets", True]],
        "mask_connections": ["registry"],
        "deferred_at": "2026-11-30T00:00:00+00:00",
        "hold_seconds": 90.0,
        "announce_selection": True,
        "region": "eu-west-1",
    }
    legacy = {"aws_conn_id", "region_name"}  # 0.1.0's form, folded into hook_kwargs
    parameters = set(inspect.signature(SageMakerPreferenceJobTrigger.__init__).parameters) - {"self"}
    assert parameters - legacy == set(given), "a new constructor argument needs a value here"
    for name, value in given.items():
        assert value != inspect.signature(SageMakerPreferenceJobTrigger.__init__).parameters[name].default, name
    _, kwargs = SageMakerPreferenceJobTrigger(**given).serialize()
    assert kwargs == given


def test_a_trigger_serialized_by_0_1_0_still_builds_its_clients_from_the_same_connection():
    from airflow_sm_prefs.sagemaker.connection import Connection

    legacy = SageMakerPreferenceJobTrigger(job_name="j", job_kind="training", aws_conn_id="c", region_name="r")
    assert legacy.connection == Connection(aws_conn_id="c", region_name="r")
    # 0.2's first form, two of the hook's arguments: the others are the connection's own.
    two_keys = SageMakerPreferenceJobTrigger(job_name="j", job_kind="training", hook_kwargs={"aws_conn_id": "c"})
    assert two_keys.serialize()[1]["hook_kwargs"] == {
        "aws_conn_id": "c",
        "region_name": None,
        "verify": None,
        "config": None,
    }


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="job_kind"):
        SageMakerPreferenceJobTrigger(job_name="j", job_kind="tuning")
    with pytest.raises(ValueError, match="wait_for"):
        SageMakerPreferenceJobTrigger(job_name="j", job_kind="training", wait_for="forever")


# Whether a trigger that leaves its triggerer stops its job, by the task's state at that moment.
STOPS_THE_JOB = {
    "failed": True,  # a user marked it failed, or its run failed
    "success": True,  # marked success
    "skipped": True,  # marked skipped, or its run marked failed before it ran
    "removed": True,
    "upstream_failed": True,
    None: True,  # cleared, not yet scheduled again
    # Another triggerer took the trigger over (this one missed its heartbeats) and may have fired its event
    # already: the task is deferred again, or resumed, or retrying. The job is still the task's.
    "deferred": False,
    "scheduled": False,
    "queued": False,
    "running": False,
    "up_for_retry": False,
    "up_for_reschedule": False,
    "awaiting_input": False,  # Airflow 3.3's human-in-the-loop wait: never this operator's, never a user's end
    "restarting": False,  # cleared while running: the next try stops the job before it starts another
    "unreadable": False,  # cannot tell: a restart must not stop a healthy job (the listener covers a user's end)
}


def test_every_task_state_is_decided():
    from airflow.utils.state import TaskInstanceState

    from airflow_sm_prefs.wait.triggers import USER_ENDED_STATES

    # Every state this Airflow line has is decided (a state a later line adds fails here until it is).
    assert {state.value for state in TaskInstanceState} <= set(STOPS_THE_JOB)
    assert {state or "none" for state, stops in STOPS_THE_JOB.items() if stops} == USER_ENDED_STATES


@pytest.mark.parametrize(("state", "stopped"), list(STOPS_THE_JOB.items()))
async def test_on_kill_stops_the_job_only_when_a_user_ended_the_task(
    start_emulator, aws_connection, monkeypatch, state, stopped
):
    """Airflow 3.3 calls on_kill whenever a trigger leaves its triggerer: on a user's action, and when another
    triggerer took it over, by which time the task may have resumed from the other copy's event."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("moved", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "moved")
    asked = _task_in_state(monkeypatch, trigger, state, map_index=2)
    await trigger.on_kill()
    assert asked == [{"dag_id": "nightly", "task_ids": ["train"], "run_ids": ["r1"], "map_index": 2}]
    status = server.engine.describe("training", "moved")["TrainingJobStatus"]
    assert status == ("Stopping" if stopped else "InProgress")


@pytest.mark.parametrize(
    ("calls_on_kill", "state", "stopped"),
    [
        (False, "deferred", False),  # its triggerer stopped or handed it over
        (False, "queued", False),  # handed over, and the other copy's event resumed the task
        (False, "failed", True),  # marked failed by a user
        (False, None, True),  # cleared: the task has no state
        (False, "unreadable", False),  # cannot tell: a restart must not stop a healthy job
        (True, "failed", False),  # Airflow 3.3 calls on_kill for that; cancelling alone stops nothing
    ],
)
async def test_before_airflow_3_3_a_cancelled_trigger_stops_its_job_only_after_a_users_action(
    start_emulator, aws_connection, monkeypatch, calls_on_kill, state, stopped
):
    from airflow_sm_prefs.platform import airflow_lines

    server = start_emulator("all-busy-then-free", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("cancelled", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "cancelled")
    _task_in_state(monkeypatch, trigger, state)
    monkeypatch.setattr(airflow_lines, "triggerer_calls_on_kill", lambda: calls_on_kill)
    running = asyncio.ensure_future(trigger.run().__anext__())
    await asyncio.sleep(1.0)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    status = server.engine.describe("training", "cancelled")["TrainingJobStatus"]
    assert status == ("Stopping" if stopped else "InProgress")


def test_what_this_airflow_line_offers_a_trigger_is_known():
    """The facts the trigger rests on, checked on each line the platform matrix runs."""
    from importlib.metadata import version

    from packaging.version import Version

    from airflow_sm_prefs.platform import airflow_lines

    release = Version(version("apache-airflow")).release
    assert airflow_lines.triggerer_calls_on_kill() is (release >= (3, 3))


def test_triggers_on_one_connection_share_a_hook_renewed_after_a_while(monkeypatch):
    """Each new hook reads its connection through the supervisor; Airflow 3.1's triggerer crashed when several
    did at once. A renewed hook picks up a rotated secret."""
    import time

    from airflow_sm_prefs.sagemaker import hooks
    from airflow_sm_prefs.sagemaker.connection import Connection

    connection = Connection("a", "us-east-1")
    first = hooks.shared_hook(connection)
    assert hooks.shared_hook(Connection("a", "us-east-1")) is first
    assert hooks.shared_hook(connection.in_region("eu-west-1")) is not first
    later = time.monotonic() + hooks.SHARED_HOOK_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert hooks.shared_hook(connection) is not first


# -- the deferral hold and the trigger's own announcement (apache/airflow#67287: docs/how-it-works.md) ----------


HOLD_SECONDS = 10


async def test_an_event_is_held_until_the_hold_is_over_and_reports_the_jobs_latest_state(
    start_emulator, aws_connection
):
    """The job is selected at once and completes during the hold: one event, after the hold, saying it finished
    (not the selection the trigger saw first)."""
    server = start_emulator("ample")
    boto_client(server.endpoint_url).create_training_job(**training_request("held", GPU_PAIR))
    deferred_at = pendulum.now("UTC")
    # Long enough for a trigger started on a busy machine to see the selection inside it (one started 4 s late
    # under a CPU hog), short enough to wait out.
    hold_until = deferred_at.add(seconds=HOLD_SECONDS)
    trigger = _trigger(
        aws_connection(server),
        "held",
        wait_for="selection",
        deferred_at=deferred_at.isoformat(),
        hold_seconds=HOLD_SECONDS,
    )
    task = asyncio.ensure_future(_first_event(trigger))
    while server.engine.calls["DescribeTrainingJob"] < 1:  # the trigger has seen the job selected
        assert pendulum.now("UTC") < hold_until, "the trigger did not look at the job inside the hold"
        await asyncio.sleep(0.05)
    assert not task.done(), "an event was sent inside the hold"
    control(server.endpoint_url, "advance", {"seconds": 5000})
    payload = await task
    assert pendulum.now("UTC") >= hold_until
    assert (payload["status"], payload["description"]["TrainingJobStatus"]) == ("finished", "Completed")
    assert payload["deferred_at"] == deferred_at.isoformat(), "the resumed task says how long its wait took"


async def test_a_passed_hold_delays_nothing(start_emulator, aws_connection):
    server = start_emulator("ample")
    boto_client(server.endpoint_url).create_training_job(**training_request("late", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 5000})
    long_ago = pendulum.now("UTC").subtract(seconds=100).isoformat()
    trigger = _trigger(aws_connection(server), "late", deferred_at=long_ago, hold_seconds=90)
    # Held wrongly, the event would come 90 s from now: a minute tells the two apart on a machine however busy.
    payload = await _first_event(trigger, timeout=60)
    assert payload["status"] == "finished"


async def test_a_deadline_inside_the_hold_is_sent_once_the_hold_is_over(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    never_freed = [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]
    boto_client(server.endpoint_url).create_training_job(**training_request("bound", never_freed))
    now = pendulum.now("UTC")
    trigger = _trigger(
        aws_connection(server),
        "bound",
        pending_deadline=now.add(seconds=0.5).isoformat(),
        deferred_at=now.isoformat(),
        hold_seconds=2,
    )
    payload = await _first_event(trigger)
    assert pendulum.now("UTC") >= now.add(seconds=2)
    assert payload["status"] == "pending_timeout"


async def test_a_pending_bound_passed_inside_the_hold_is_void_once_the_job_is_selected(start_emulator, aws_connection):
    """The bound applies only while the job waits for capacity: selected before the hold is over, the job is not
    abandoned for a bound that no longer applies, and the wait goes on to its end."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(
        **training_request("late-capacity", [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}])
    )
    now = pendulum.now("UTC")
    trigger = _trigger(
        aws_connection(server),
        "late-capacity",
        pending_deadline=now.add(seconds=0.5).isoformat(),
        deferred_at=now.isoformat(),
        hold_seconds=3,
    )
    task = asyncio.ensure_future(_first_event(trigger))
    await asyncio.sleep(1.5)  # the bound has passed; the hold has not
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 1})
    await asyncio.sleep(2.5)  # the hold is over, the job runs
    assert not task.done(), "the job was selected: no pending bound ends its wait"
    control(server.endpoint_url, "advance", {"seconds": 5000})
    payload = await task
    assert (payload["status"], payload["description"]["TrainingJobStatus"]) == ("finished", "Completed")


class _TaskInstance:
    dag_id, task_id, run_id, map_index = "d", "t", "r", 3


async def test_the_trigger_announces_the_selection_itself_and_waits_on_for_the_end(
    start_emulator, aws_connection, monkeypatch
):
    """No event for the selection (each resume is a chance for Airflow's race): the XCom is pushed from the
    triggerer, once, and the end's event says so, so the task does not push it again."""
    from airflow_sm_prefs.wait import announcement

    pushed: list[tuple] = []

    async def ask(call, *args, **kwargs):
        if getattr(call, "__name__", "") == "set":  # the XCom; masking asks for Variables and connections too
            pushed.append((call.__name__, args, kwargs))

    monkeypatch.setattr(announcement.supervisor_calls, "ask", ask)
    server = start_emulator("gpu-shortage", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("announce", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "announce", announce_selection=True, region="us-east-1")
    trigger.task_instance = _TaskInstance()
    task = asyncio.ensure_future(_first_event(trigger))
    await until_or_ended(task, lambda: bool(pushed), "the trigger to announce the selection")
    assert not task.done(), "a selection must not end the wait"
    ((name, args, scope),) = pushed
    assert (name, args[0], scope) == (
        "set",
        "selection",
        {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": 3},
    )
    assert (args[1]["selected_instance_type"], args[1]["selected_rank"], args[1]["region"]) == (
        "ml.p4d.24xlarge",
        1,
        "us-east-1",
    )
    control(server.endpoint_url, "advance", {"seconds": 5000})
    payload = await task
    assert (payload["status"], payload["announced"]) == ("finished", True)
    assert len(pushed) == 1, "announced once"


async def test_a_selection_the_trigger_could_not_push_is_left_to_the_task(start_emulator, aws_connection):
    """Outside a triggerer (no task instance to push for) the end's event says nothing was announced."""
    server = start_emulator("gpu-shortage", clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("unpushed", GPU_PAIR))
    trigger = _trigger(aws_connection(server), "unpushed", announce_selection=True)
    task = asyncio.ensure_future(_first_event(trigger))
    await asyncio.sleep(1.0)
    control(server.endpoint_url, "advance", {"seconds": 5000})
    payload = await task
    assert (payload["status"], payload["announced"]) == ("finished", False)
