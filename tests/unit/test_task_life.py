"""The task's state machine, driven with a fake hook: each way a wait ends leads to the step it must."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_sm_prefs.preflight.certification import Certification
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.task import attempts
from airflow_sm_prefs.task.task_failures import NoCapacityError
from airflow_sm_prefs.task.task_life import Defer, Done, TaskLife, Waiting
from airflow_sm_prefs.wait.polling import WaitOutcome
from airflow_sm_prefs.wait.wait_event import WaitEnded
from tests.helpers import FakeTI, TaskLog

DEADLINE = "2030-01-01T00:00:00+00:00"
TEAM_AWS = Connection(aws_conn_id="team_aws")
WAITING = Waiting(
    deferrable=True,
    check_interval=60.0,
    max_pending=None,
    wait_timeout=None,
    stop_on_kill=True,
    stop_on_timeout=True,
    resubmit_after_failure=True,
    stream_logs=False,
    retries=0,
)


def described(name: str, status: str = "InProgress", selected: str | None = None, **more: Any) -> dict[str, Any]:
    config = {
        "InstancePreferences": [
            {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        ]
    }
    if selected:
        config |= {"SelectedInstanceType": selected, "SelectedInstanceCount": 2}
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "TrainingJobStatus": status,
        "SecondaryStatus": "Pending" if status == "InProgress" and not selected else "Training",
        "ResourceConfig": config,
        **more,
    }


class FakeHook:
    def __init__(self, *jobs: dict[str, Any], reachable: bool = True) -> None:
        self.jobs = {job["TrainingJobName"]: job for job in jobs}
        self.reachable = reachable
        self.described: list[str] = []
        self.stopped: list[str] = []

    def describe_job(self, kind: Any, name: str) -> dict[str, Any]:
        self.described.append(name)
        if not self.reachable:
            raise ConnectionError("endpoint unreachable")
        return self.jobs[name]

    def describe_job_at(self, kind: Any, name: str) -> tuple[dict[str, Any], float | None]:
        return self.describe_job(kind, name), None

    def stop_job(self, kind: Any, name: str, log: Any) -> None:
        self.stopped.append(name)
        self.jobs[name] = {**self.jobs[name], "TrainingJobStatus": "Stopped"}


class FakeStore(dict):
    def set(self, key: str, value: Any, retention: Any = None) -> None:
        self[key] = value


def life(hook: FakeHook, waiting: Waiting = WAITING, claimed: str | None = "job-a") -> tuple[TaskLife, dict, TaskLog]:
    context: dict[str, Any] = {"ti": FakeTI(), "task_state_store": FakeStore()}
    if claimed:
        context["task_state_store"][attempts.STATE_KEY] = {
            "job_name": claimed,
            "base_name": claimed,
            "generation": 1,
            "phase": attempts.DEFERRED,
            "try_number": 1,
            "submitted_at": "2029-12-31T00:00:00+00:00",
            "job_kind": "training",
        }
    log = TaskLog()
    linked: list[str] = []
    task = TaskLife(
        TRAINING,
        hook,
        connection=Connection(),
        region="us-east-1",
        waiting=waiting,
        certification=Certification.judged(None, None, None),
        context=context,
        log=log,
        persist_links=linked.append,
    )  # type: ignore[arg-type]
    return task, context, log


def ended(outcome: WaitOutcome, name: str = "job-a", description: dict | None = None, **more: Any) -> WaitEnded:
    return WaitEnded(outcome, name, description, more.pop("announced", False), DEADLINE, None, **more)


def test_an_event_about_another_job_is_ignored_and_the_claimed_job_followed():
    hook = FakeHook(described("job-a"), described("job-b", "Completed"))
    task, context, log = life(hook, claimed="job-a")
    step = task.resume(ended(WaitOutcome.FINISHED, "job-b", described("job-b", "Completed")), lambda: {})
    assert isinstance(step, Defer) and step.trigger.job_name == "job-a"
    assert hook.described == ["job-a"], "the claimed job is looked at, not the one the stray event named"
    assert any("Ignoring an event about SageMaker job job-b" in m for m in log.messages)
    assert "record" not in context["ti"].xcoms


def test_a_resume_of_an_earlier_try_leaves_the_later_trys_job_and_claim_alone():
    """Airflow failed try 1 (the deferral race) and try 2 reattached; try 1's stale resume must not stop, record
    or reclaim the job."""
    hook = FakeHook(described("job-a", "Completed", selected="ml.p4d.24xlarge"))
    task, context, _ = life(hook)
    context["task_state_store"][attempts.STATE_KEY] |= {"try_number": 2, "phase": attempts.DEFERRED}
    before = dict(context["task_state_store"][attempts.STATE_KEY])
    with pytest.raises(AirflowException, match="try 1 resumed after try 2 took over SageMaker job job-a"):
        task.resume(ended(WaitOutcome.FINISHED, description=described("job-a", "Completed")), dict)
    assert context["task_state_store"][attempts.STATE_KEY] == before
    assert (hook.described, hook.stopped, context["ti"].xcoms) == ([], [], {})


def test_a_selection_is_announced_and_the_wait_goes_on_for_the_end():
    hook = FakeHook()
    task, context, _ = life(hook)
    step = task.resume(ended(WaitOutcome.SELECTED, description=described("job-a", selected="ml.p4d.24xlarge")), dict)
    assert isinstance(step, Defer)
    assert (step.trigger.wait_for, step.trigger.deadline) == ("completion", DEADLINE)
    assert context["ti"].xcoms["selection"]["selected_instance_type"] == "ml.p4d.24xlarge"
    assert context["ti"].xcoms["selection"]["selected_rank"] == 1
    assert context["task_state_store"][attempts.STATE_KEY]["phase"] == attempts.DEFERRED
    assert hook.described == [], "the event's description is used as it came"


def test_a_finished_job_ends_the_task_with_its_record():
    job = described("job-a", "Completed", selected="ml.p4d.24xlarge")
    task, context, _ = life(FakeHook())
    step = task.resume(ended(WaitOutcome.FINISHED, description=job, announced=True), dict)
    assert isinstance(step, Done)
    assert step.record["status"] == "Completed" and step.view.source == job
    assert context["task_state_store"][attempts.STATE_KEY]["phase"] == attempts.FINISHED


def test_an_event_without_a_description_asks_sagemaker_and_falls_back_to_the_name():
    """A trigger that saw no change since the deferral (a quiet queue) sends no description."""
    hook = FakeHook(described("job-a"))
    task, context, _ = life(hook, replace(WAITING, stop_on_timeout=False))
    with pytest.raises(AirflowException, match="the job was left queued"):
        task.resume(ended(WaitOutcome.PENDING_TIMEOUT), dict)
    assert hook.described == ["job-a"]
    assert context["ti"].xcoms["record"]["status"] == "InProgress"
    task, context, log = life(FakeHook(described("job-a"), reachable=False), replace(WAITING, stop_on_timeout=False))
    with pytest.raises(AirflowException, match="the job was left queued"):
        task.resume(ended(WaitOutcome.PENDING_TIMEOUT), dict)
    assert context["ti"].xcoms["record"]["job_name"] == "job-a"
    assert any("recording the last status seen" in m for m in log.messages)


FINISH_BY_MOMENT = "2030-01-01T00:30:00Z"  # finish_by's bound, kept with the claim as pending_until


@pytest.mark.parametrize(
    ("pending_deadline", "words"),
    [
        ("2030-01-01T00:30:00+00:00", "in time to finish by finish_by"),  # finish_by's moment passed
        ("2030-01-01T00:15:00+00:00", "within max_pending"),  # max_pending's came first, finish_by or not
        (None, "within max_pending"),  # an event from a trigger that sent no pending deadline
    ],
)
def test_no_capacity_in_time_stops_the_job_and_names_the_bound_that_passed(pending_deadline, words):
    hook = FakeHook(described("job-a"))
    task, context, _ = life(hook, replace(WAITING, max_pending=900))
    context["task_state_store"][attempts.STATE_KEY]["pending_until"] = FINISH_BY_MOMENT
    event = replace(
        ended(WaitOutcome.PENDING_TIMEOUT, description=described("job-a")), pending_deadline=pending_deadline
    )
    with pytest.raises(NoCapacityError, match=rf"got no capacity {words} \(.*the job was stopped"):
        task.resume(event, dict)
    assert hook.stopped == ["job-a"]
    assert context["ti"].xcoms["record"]["status"] == "Stopped"


def test_a_wait_with_no_claim_to_read_names_max_pending():
    """Airflow before 3.3 keeps the claim in XCom: a resume that finds none still words its failure."""
    from airflow_sm_prefs.task.task_life import pending_bound

    moment = pendulum.parse(FINISH_BY_MOMENT)
    assert pending_bound(None, moment) == "within max_pending"


def test_stop_on_timeout_false_leaves_the_job_running_and_says_so():
    hook = FakeHook(described("job-a", selected="ml.p4d.24xlarge"))
    task, _, _ = life(hook, replace(WAITING, stop_on_timeout=False))
    with pytest.raises(AirflowException, match="the job was left running"):
        task.resume(ended(WaitOutcome.TIMEOUT, description=described("job-a", selected="ml.p4d.24xlarge")), dict)
    assert hook.stopped == []


def test_an_unknown_status_means_the_job_was_lost_and_a_retry_reattaches():
    event = WaitEnded.parse({"status": "from-a-newer-version", "job_name": "job-a", "description": None})
    assert event.outcome is WaitOutcome.ERROR
    task, _, _ = life(FakeHook(described("job-a")))
    with pytest.raises(RuntimeError, match="lost track of SageMaker job job-a: boom; a retry reattaches"):
        task.resume(replace(event, message="boom"), dict)


def test_a_wait_event_survives_its_payload_and_keeps_the_keys_0_1_0_sent():
    event = WaitEnded(
        WaitOutcome.PENDING_TIMEOUT, "job-a", {"TrainingJobName": "job-a"}, True, DEADLINE, DEADLINE, "m", DEADLINE
    )
    payload = event.payload(TRAINING)
    assert set(payload) - {"deferred_at"} == {
        "status",
        "job_name",
        "job_kind",
        "description",
        "message",
        "announced",
        "deadline",
        "pending_deadline",
    }
    assert (payload["status"], payload["deferred_at"]) == ("pending_timeout", DEADLINE)
    assert WaitEnded.parse(payload) == event
    assert WaitEnded.parse({**payload, "deferred_at": None}).deferred_at is None  # a trigger of 0.5 or before
    assert WaitEnded.parse({**payload, "description": {}}).description is None
    assert replace(event, description=None).payload(TRAINING)["description"] is None


# -- following a claimed job: the deferral it builds, or the wait in this slot ------------------------------------


def _follow(task: TaskLife, request: dict[str, Any] | None = None) -> Any:
    """``_follow`` through its public door: an event about another job makes the task follow its own claim."""
    return task.resume(ended(WaitOutcome.FINISHED, "job-stray", described("job-stray", "Completed")), lambda: request)


def test_following_a_queued_job_defers_with_a_trigger_built_from_the_waiting_arguments():
    from airflow_sm_prefs.task.deadlines import wait_deadlines
    from airflow_sm_prefs.task.task_life import DEFER_TIMEOUT_MARGIN

    waiting = replace(
        WAITING,
        check_interval=45.0,
        stop_on_kill=False,
        stream_logs=False,
        mask_variables=(("team_secrets", True),),
        mask_connections=("warehouse",),
    )
    hook = FakeHook(described("job-a"))
    task, context, log = life(hook, waiting)
    linked: list[str] = []
    task.persist_links = linked.append
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxPendingTimeInSeconds": 1800}}
    before = pendulum.now("UTC")
    step = _follow(task, request)
    after = pendulum.now("UTC")
    assert isinstance(step, Defer)
    trigger = step.trigger
    deadline, pending_deadline = wait_deadlines(
        TRAINING, request, submitted_at="2029-12-31T00:00:00+00:00", max_pending=None, wait_timeout=None
    )
    # One deferral for the whole wait: the trigger announces the selection itself, without resuming the task.
    assert (trigger.job_name, trigger.job_kind, trigger.wait_for) == ("job-a", "training", "completion")
    assert trigger.announce_selection is True and trigger.region == "us-east-1"
    # No event before the hold: the deferral plus [sm_prefs] deferral_hold_seconds (90 s by default).
    assert before <= pendulum.parse(trigger.deferred_at) <= after and trigger.hold_seconds == 90.0  # type: ignore[operator]
    assert (trigger.deadline, trigger.pending_deadline) == (deadline.isoformat(), pending_deadline)
    assert (trigger.poll_interval, trigger.stop_on_kill, trigger.stream_logs) == (45.0, False, False)
    assert trigger.mask_variables == [["team_secrets", True]] and trigger.mask_connections == ["warehouse"]
    assert trigger.known_state is not None and trigger.log_cursor is None
    remaining = deadline - after
    assert remaining + DEFER_TIMEOUT_MARGIN <= step.timeout <= deadline - before + DEFER_TIMEOUT_MARGIN
    assert (task.active_job, linked, hook.described) == ("job-a", ["job-a"], ["job-a"])
    assert context["task_state_store"][attempts.STATE_KEY]["phase"] == attempts.DEFERRED
    assert "selection" not in context["ti"].xcoms, "nothing chosen yet: nothing announced"
    assert log.said[-1] == (
        "info",
        "Deferring: the job's end resumes the task, no sooner than 90 s from now ([sm_prefs] "
        "deferral_hold_seconds: Airflow must first take this try's exit)",
    )


def test_following_a_job_that_already_chose_announces_it_and_waits_for_the_end():
    hook = FakeHook(described("job-a", selected="ml.p4d.24xlarge"))
    task, context, _ = life(hook)
    step = _follow(task, {})
    assert isinstance(step, Defer) and step.trigger.wait_for == "completion"
    assert step.trigger.announce_selection is False, "announced here: the trigger must not announce it again"
    assert context["ti"].xcoms["selection"]["selected_instance_type"] == "ml.p4d.24xlarge"


def test_following_a_job_that_already_ended_finishes_at_once():
    hook = FakeHook(described("job-a", "Completed", selected="ml.p4d.24xlarge"))
    task, context, _ = life(hook)
    step = _follow(task, {})
    assert isinstance(step, Done) and step.record["status"] == "Completed"
    assert context["ti"].xcoms["selection"]["selected_rank"] == 1, "announced on the way out"
    assert context["task_state_store"][attempts.STATE_KEY]["phase"] == attempts.FINISHED


class EndingHook(FakeHook):
    """The job ends between one Describe and the next."""

    def describe_job(self, kind: Any, name: str) -> dict[str, Any]:
        seen = super().describe_job(kind, name)
        self.jobs[name] = {**seen, "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}
        return seen


def test_a_task_that_does_not_defer_waits_in_its_slot_until_the_job_ends():
    hook = EndingHook(described("job-a", selected="ml.p4d.24xlarge"))
    task, context, _ = life(hook, replace(WAITING, deferrable=False, check_interval=0.01))
    step = _follow(task, {})
    assert isinstance(step, Done) and step.record["status"] == "Completed"
    assert hook.described == ["job-a", "job-a"], "one Describe to follow, one that saw the end"
    assert context["task_state_store"][attempts.STATE_KEY]["phase"] == attempts.FINISHED


def test_a_blocking_wait_that_sees_the_selection_announces_it_and_keeps_waiting_in_the_slot():
    hook = FakeHook(described("job-a"))
    task, context, _ = life(hook, replace(WAITING, deferrable=False, check_interval=0.01))
    chosen = described("job-a", selected="ml.p4d.24xlarge")
    hook.jobs["job-a"] = {**chosen, "TrainingJobStatus": "Completed"}
    step = task.resume(ended(WaitOutcome.SELECTED, description=chosen), dict)
    assert isinstance(step, Done) and step.record["selected_instance_type"] == "ml.p4d.24xlarge"
    assert context["ti"].xcoms["selection"]["selected_rank"] == 1


class CreatingHook(FakeHook):
    """SageMaker as submission sees it: no job under the name until the task creates it."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[dict[str, Any]] = []

    def describe_job_or_none(self, kind: Any, name: str) -> dict[str, Any] | None:
        return self.jobs.get(name)

    def create_job(self, kind: Any, request: dict[str, Any]) -> None:
        self.created.append(request)
        self.jobs[request["TrainingJobName"]] = described(request["TrainingJobName"])


def test_a_first_start_prepares_creates_claims_and_defers_on_the_new_job():
    from airflow_sm_prefs.preflight.runner import Prepared

    hook = CreatingHook()
    task, context, _ = life(hook, replace(WAITING, stop_on_kill=False), claimed=None)
    assert task.active_job is None, "nothing to stop before a job exists"
    task.connection = TEAM_AWS
    prepared: list[dict[str, Any]] = []

    def preflight(request: dict[str, Any]) -> Prepared:
        prepared.append(request)
        return Prepared({**request, "Checked": True}, None, dropped=({"rank": 1, "entry": {}, "reason": "r"},))

    step = task.start({"StoppingCondition": {"MaxRuntimeInSeconds": 600}}, "eval-job", preflight)
    assert isinstance(step, Defer) and step.trigger.job_name == "eval-job"
    (created,) = hook.created
    assert created["TrainingJobName"] == "eval-job" and created["Checked"] is True and len(prepared) == 1
    claim = attempts.JobClaim.from_stored(context["task_state_store"][attempts.STATE_KEY])
    assert claim is not None and (claim.job_name, claim.phase, claim.job_kind) == (
        "eval-job",
        attempts.DEFERRED,
        "training",
    )
    assert claim.preflight is not None and claim.preflight["dropped_preferences"][0]["reason"] == "r"
    # What the listener and a retry read from the claim: the waiting arguments and where the job lives.
    assert (claim.stop_on_kill, claim.aws_conn_id, claim.region_name) == (False, "team_aws", "us-east-1")
    assert task.active_job == "eval-job"
    again = task.start({"StoppingCondition": {"MaxRuntimeInSeconds": 600}}, "eval-job", preflight)
    assert isinstance(again, Defer) and len(hook.created) == 1 and len(prepared) == 1, "reattached, not judged again"


# -- the job's log, where the task follows it --------------------------------------------------------------------

STARTED = {"TrainingStartTime": "2029-12-31T00:10:00+00:00"}


@pytest.fixture
def worker_logs(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """The worker's log reading, recorded: which job, with which client, from which moment."""
    from airflow_sm_prefs.wait import worker_logs as module

    calls: dict[str, list] = {"last_lines": [], "start_from_now": [], "logs_client": []}
    monkeypatch.setattr(module, "logs_client", lambda connection: calls["logs_client"].append(connection) or "logs")
    monkeypatch.setattr(
        module,
        "last_lines",
        lambda client, kind, name, log: calls["last_lines"].append((client, kind, name)) or ["oom at step 9", "exit 1"],
    )
    monkeypatch.setattr(
        module, "start_from_now", lambda ti, name, now, log: calls["start_from_now"].append((ti.task_id, name, now))
    )
    return calls


def test_a_job_that_failed_after_starting_fails_the_task_with_its_last_log_lines(worker_logs):
    failed = described("job-a", "Failed", selected="ml.p4d.24xlarge", FailureReason="AlgorithmError", **STARTED)
    task, _, _ = life(FakeHook(), replace(WAITING, stream_logs=True))
    task.connection = TEAM_AWS
    with pytest.raises(AirflowException) as raised:
        task.resume(ended(WaitOutcome.FINISHED, description=failed, announced=True), dict)
    assert str(raised.value).endswith("Last 2 lines of the job's log:\noom at step 9\nexit 1")
    assert worker_logs["last_lines"] == [("logs", TRAINING, "job-a")]
    assert worker_logs["logs_client"] == [TEAM_AWS]


@pytest.mark.parametrize(
    ("stream_logs", "started"), [(False, STARTED), (True, {})], ids=["not streaming", "failed before starting"]
)
def test_no_log_is_read_for_a_task_not_streaming_or_a_job_that_never_started(worker_logs, stream_logs, started):
    failed = described("job-a", "Failed", selected="ml.p4d.24xlarge", FailureReason="CapacityError", **started)
    task, _, _ = life(FakeHook(), replace(WAITING, stream_logs=stream_logs))
    with pytest.raises(AirflowException) as raised:
        task.resume(ended(WaitOutcome.FINISHED, description=failed, announced=True), dict)
    assert "Last 2 lines" not in str(raised.value) and worker_logs["last_lines"] == []


class ReattachingHook(CreatingHook):
    def job_tags(self, kind: Any, name: str) -> dict[str, str]:
        return {}

    def job_names_containing(self, kind: Any, text: str) -> list[str]:
        return [name for name in self.jobs if text in name]


@pytest.mark.parametrize("running", [True, False], ids=["running", "still queued"])
def test_a_retry_that_reattaches_to_a_running_job_shows_its_log_from_now_on(worker_logs, running):
    from airflow_sm_prefs.preflight.runner import Prepared

    hook = ReattachingHook()
    hook.jobs["job-a"] = described("job-a", selected="ml.p4d.24xlarge", **(STARTED if running else {}))
    task, context, _ = life(hook, replace(WAITING, stream_logs=True))
    task.connection = TEAM_AWS
    context["task_state_store"][attempts.STATE_KEY]["phase"] = attempts.SUBMITTED
    step = task.start({}, "job-a", Prepared)
    assert isinstance(step, Defer) and hook.created == []
    assert worker_logs["start_from_now"] == ([("train", "job-a", None)] if running else [])


def test_the_wait_is_bounded_by_the_claims_pending_until_and_the_tasks_timeout():
    from airflow_sm_prefs.task.deadlines import wait_deadlines

    hook = FakeHook(described("job-a"))
    task, context, _ = life(hook, replace(WAITING, wait_timeout=5400, max_pending=1200))
    until = "2029-12-31T00:15:00+00:00"
    context["task_state_store"][attempts.STATE_KEY]["pending_until"] = until
    step = _follow(task, {})
    assert isinstance(step, Defer)
    expected = wait_deadlines(
        TRAINING, {}, submitted_at="2029-12-31T00:00:00+00:00", max_pending=1200, wait_timeout=5400, pending_until=until
    )
    assert (step.trigger.deadline, step.trigger.pending_deadline) == (expected[0].isoformat(), until)
    assert expected == (pendulum.parse("2029-12-31T01:30:00+00:00"), pendulum.parse(until))


def test_a_task_waiting_in_its_slot_says_so_in_its_claim():
    phases: list[str] = []

    class WatchedHook(EndingHook):
        def describe_job(self, kind: Any, name: str) -> dict[str, Any]:
            phases.append(context["task_state_store"][attempts.STATE_KEY]["phase"])
            return super().describe_job(kind, name)

    hook = WatchedHook(described("job-a", selected="ml.p4d.24xlarge"))
    task, context, _ = life(hook, replace(WAITING, deferrable=False, check_interval=0.01))
    assert isinstance(_follow(task, {}), Done)
    assert phases == [attempts.DEFERRED, attempts.BLOCKING], "claimed before following, then waiting in the slot"


def test_a_resumption_names_both_jobs_of_a_stray_event_and_marks_its_own_claim_resumed():
    hook = FakeHook(described("job-a"))
    task, context, log = life(hook)
    _follow(task, {})
    assert any(m.endswith("this task instance follows job job-a") for m in log.messages), log.messages
    seen: list[str] = []

    class Watched(FakeHook):
        def describe_job(self, kind: Any, name: str) -> dict[str, Any]:
            seen.append(context["task_state_store"][attempts.STATE_KEY]["phase"])
            return super().describe_job(kind, name)

    task, context, _ = life(Watched(described("job-a")), replace(WAITING, stop_on_timeout=False))
    with pytest.raises(AirflowException):
        task.resume(ended(WaitOutcome.PENDING_TIMEOUT), dict)
    assert seen == [attempts.RESUMED] and task.active_job == "job-a"


def test_a_resumed_wait_keeps_the_events_bounds_and_what_it_announced():
    pending = "2029-12-31T06:00:00+00:00"
    task, _, _ = life(FakeHook())
    queued = described("job-a")
    step = task.resume(WaitEnded(WaitOutcome.SELECTED, "job-a", queued, False, DEADLINE, pending), dict)
    assert isinstance(step, Defer)
    assert (step.trigger.deadline, step.trigger.pending_deadline) == (DEADLINE, pending)
    assert step.trigger.connection == Connection()
    chosen = described("job-a", selected="ml.p4d.24xlarge")
    task, _, _ = life(FakeHook())
    step = task.resume(WaitEnded(WaitOutcome.SELECTED, "job-a", chosen, True, None, None), dict)
    assert isinstance(step, Defer) and step.trigger.wait_for == "completion"
    assert step.trigger.deadline is not None and step.trigger.deadline != DEADLINE, "a default deadline, not none"


class PullCountingTI(FakeTI):
    """A task instance that counts the XComs pulled that were not there (each is an error line in Airflow 3)."""

    missing: list[str]

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", **_: Any) -> Any:
        if key not in self.xcoms:
            self.missing = [*getattr(self, "missing", []), key]
        return self.xcoms.get(key)


def test_a_streaming_task_hands_its_log_cursor_to_the_trigger_or_to_its_own_reader(monkeypatch):
    from airflow_sm_prefs.wait import blocking
    from airflow_sm_prefs.wait import worker_logs as module
    from airflow_sm_prefs.wait.log_follower import LogCursor
    from airflow_sm_prefs.wait.log_stream import CURSOR_XCOM_KEY

    task, context, _ = life(
        FakeHook(described("job-a", selected="ml.p4d.24xlarge")), replace(WAITING, stream_logs=True)
    )
    context["ti"] = ti = PullCountingTI()
    task.connection = TEAM_AWS
    step = _follow(task, {})
    # A fresh deferral: the cursor at the log's beginning, saved where the trigger reads it, and nothing pulled.
    assert isinstance(step, Defer) and step.trigger.log_cursor == LogCursor()
    assert ti.xcoms[CURSOR_XCOM_KEY] == LogCursor().to_json() == step.trigger.serialize()[1]["log_cursor"]
    assert step.trigger.stream_logs is True and getattr(ti, "missing", []) == []
    assert step.trigger.connection == TEAM_AWS
    cursor = LogCursor(after=1_700_000_000_000, read_at_after=(("algo-1", 2),))
    task, _, _ = life(FakeHook(described("job-a", selected="ml.p4d.24xlarge")), replace(WAITING, stream_logs=True))
    task.log_cursor = cursor  # a reattached try's, from now on
    assert _follow(task, {}).trigger.log_cursor == cursor

    readers: list[tuple] = []

    def reader(connection, kind, name, log, saved):
        readers.append((connection, kind, name, saved, log is not None))
        return "the reader"

    waited: list[tuple] = []

    def wait(hook, view, *, wait_for, deadline, pending_deadline, check_interval, log, observed=None):
        waited.append((wait_for, deadline, pending_deadline, observed))
        return WaitOutcome.FINISHED, JobView.parse(
            TRAINING, described("job-a", "Completed", selected="ml.p4d.24xlarge")
        )

    monkeypatch.setattr(module, "blocking_reader", reader)
    monkeypatch.setattr(blocking, "wait", wait)
    task, context, _ = life(
        FakeHook(described("job-a", selected="ml.p4d.24xlarge")),
        replace(WAITING, stream_logs=True, deferrable=False),
    )
    task.connection = TEAM_AWS
    task.log_cursor = cursor
    until = "2029-12-31T00:15:00+00:00"
    context["task_state_store"][attempts.STATE_KEY]["pending_until"] = until
    assert isinstance(_follow(task, {}), Done)
    assert readers == [(TEAM_AWS, TRAINING, "job-a", cursor, True)]
    (call,) = waited
    assert (
        call[0] == "completion" and call[2] == pendulum.parse(until) and call[3] == "the reader" and call[1] is not None
    )


class CountingStore(FakeStore):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)


@pytest.mark.parametrize("outcome", [WaitOutcome.FINISHED, WaitOutcome.PENDING_TIMEOUT])
def test_the_record_holds_what_preflight_decided_read_with_the_claim_once(outcome):
    decided = {
        "dropped_preferences": [{"rank": 2, "entry": {"InstanceType": "ml.g5.48xlarge"}, "reason": "too dear"}],
        "uncertified_preferences": ["preference #2 (1 x ml.p4d.24xlarge): not certified"],
        "training_plan": None,
    }
    task, context, _ = life(FakeHook(described("job-a")), replace(WAITING, stop_on_timeout=False))
    store = CountingStore(context["task_state_store"])
    store[attempts.STATE_KEY] = {**store[attempts.STATE_KEY], "preflight": decided}
    context["task_state_store"] = store
    task.claims = attempts.ClaimStore.from_context(context)
    job = described("job-a", "Completed", selected="ml.p4d.24xlarge")
    if outcome is WaitOutcome.FINISHED:
        step = task.resume(ended(outcome, description=job, announced=True), dict)
        assert isinstance(step, Done)
        kept = step.record
    else:
        with pytest.raises(AirflowException):
            task.resume(ended(outcome, description=described("job-a")), dict)
        kept = context["ti"].xcoms["record"]
    assert kept["dropped_preferences"] == decided["dropped_preferences"]
    assert kept["uncertified_preferences"] == decided["uncertified_preferences"]
    # One read to follow the claimed job, one as the task marks it finished; the record uses that one.
    assert store.reads == 2


@pytest.mark.parametrize(
    ("configured", "hold", "words"),
    [
        ("0", 0.0, "as soon as it comes ([sm_prefs] deferral_hold_seconds = 0)"),
        (
            "1",
            1.0,
            "no sooner than 1 s from now ([sm_prefs] deferral_hold_seconds: Airflow must first take this try's exit)",
        ),
    ],
)
def test_the_deferral_says_when_the_jobs_end_can_resume_the_task(monkeypatch, configured, hold, words):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEFERRAL_HOLD_SECONDS", configured)
    task, _, log = life(FakeHook(described("job-a")))
    step = _follow(task, {})
    assert isinstance(step, Defer) and step.trigger.hold_seconds == hold
    assert log.said[-1] == ("info", f"Deferring: the job's end resumes the task, {words}")


def test_a_task_that_waits_in_its_slot_holds_nothing_back():
    blocking, _, _ = life(FakeHook(), replace(WAITING, deferrable=False))
    assert blocking.hold_seconds == 0.0


def test_a_blocking_wait_announces_the_selection_when_it_happens_once_and_keeps_its_slot_claimed():
    """Downstream tasks and the UI read the selection while the job runs: announced at the look that saw it,
    not at the end, and only once; the claim still says the task waits in its slot."""
    announced_at_each_look: list[bool] = []
    phase_at_each_look: list[str] = []

    class SelectingHook(FakeHook):
        def describe_job(self, kind: Any, name: str) -> dict[str, Any]:
            assert kind is TRAINING
            announced_at_each_look.append("selection" in context["ti"].xcoms)
            phase_at_each_look.append(context["task_state_store"][attempts.STATE_KEY]["phase"])
            looks = len(announced_at_each_look)
            chosen = described(name, selected="ml.p4d.24xlarge")
            if looks == 2:
                self.jobs[name] = chosen
            elif looks > 2:
                self.jobs[name] = {**chosen, "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed"}
            return super().describe_job(kind, name)

    hook = SelectingHook(described("job-a"))
    task, context, log = life(hook, replace(WAITING, deferrable=False, check_interval=0.01))
    step = _follow(task, {})
    assert isinstance(step, Done) and step.record["status"] == "Completed"
    assert announced_at_each_look[0] is False and announced_at_each_look[-1] is True
    assert phase_at_each_look[-1] == attempts.BLOCKING
    assert len([line for line in log.messages if line.startswith("SageMaker selected")]) == 1, log.messages
