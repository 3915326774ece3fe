"""finish_by=: the deadline planned with a frozen clock (what fits, the bound, who enforces it)."""

from __future__ import annotations

import datetime as dt

import pendulum
import pytest

from airflow_sm_prefs.preflight import finish_by
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.request.preferences import RequestValidationError
from tests.helpers import GPU_PAIR, TaskLog, processing_request, training_request

NOW = pendulum.datetime(2026, 11, 30, 2, 0, tz="UTC")


def no_history(instance_type: str, count: int) -> None:
    return None


def test_the_bound_is_the_deadline_less_the_longest_expected_run_and_sagemaker_enforces_it():
    request = training_request("x", GPU_PAIR)  # MaxRuntimeInSeconds 3600
    deadline = finish_by.plan(TRAINING, request, finish_by=NOW.add(hours=4), now=NOW, history=no_history)
    assert (deadline.dropped, deadline.pending_seconds) == ({}, 3 * 3600)
    sent, pending_until = finish_by.applied(TRAINING, request, deadline, NOW)
    assert sent["StoppingCondition"]["MaxPendingTimeInSeconds"] == 3 * 3600 and pending_until is None


def test_the_bound_is_set_on_a_new_request_never_on_the_one_given():
    """With no entry dropped, the request given is the list as given itself: writing the bound into it would
    change what the guard against changed lists compares with (and the caller's request)."""
    import copy

    request = training_request("x", GPU_PAIR)
    before = copy.deepcopy(request)
    deadline = finish_by.plan(TRAINING, request, finish_by=NOW.add(hours=4), now=NOW, history=no_history)
    sent, _ = finish_by.applied(TRAINING, request, deadline, NOW)
    assert request == before and sent is not request
    assert "MaxPendingTimeInSeconds" in sent["StoppingCondition"]


def test_the_ledger_history_sets_the_expected_run_and_entries_that_cannot_fit_are_dropped():
    def history(instance_type: str, count: int):
        return (600.0, 5) if instance_type == "ml.p4d.24xlarge" else None

    request = training_request("x", GPU_PAIR)
    deadline = finish_by.plan(TRAINING, request, finish_by=NOW.add(minutes=50), now=NOW, history=history)
    (reason,) = deadline.dropped.values()
    assert reason.startswith("preference #1 (1 x ml.p5.48xlarge): expected to run 1h00m00s (MaxRuntimeInSeconds")
    assert "finish_by=2026-11-30T02:50:00Z" in reason
    assert deadline.expected_seconds == {1: 600.0} and deadline.pending_seconds == 40 * 60
    assert "median of this task's 5 completed job(s)" in deadline.explained[1]


def test_below_sagemakers_floor_the_task_enforces_the_bound_itself():
    request = training_request("x", GPU_PAIR)
    deadline = finish_by.plan(TRAINING, request, finish_by=NOW.add(minutes=80), now=NOW, history=no_history)
    sent, pending_until = finish_by.applied(TRAINING, request, deadline, NOW)
    assert deadline.pending_seconds == 20 * 60
    assert "MaxPendingTimeInSeconds" not in sent["StoppingCondition"]
    assert pending_until == pendulum.datetime(2026, 11, 30, 2, 20)


def test_processing_is_always_enforced_by_the_task():
    request = processing_request("p", [{"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1}])
    deadline = finish_by.plan(PROCESSING, request, finish_by=NOW.add(hours=5), now=NOW, history=no_history)
    _, pending_until = finish_by.applied(PROCESSING, request, deadline, NOW)
    assert pending_until == NOW.add(hours=4)


def test_a_users_smaller_pending_limit_is_kept():
    request = training_request("x", GPU_PAIR)
    request["StoppingCondition"]["MaxPendingTimeInSeconds"] = 2400
    deadline = finish_by.plan(TRAINING, request, finish_by=NOW.add(hours=6), now=NOW, history=no_history)
    sent, _ = finish_by.applied(TRAINING, request, deadline, NOW)
    assert sent["StoppingCondition"]["MaxPendingTimeInSeconds"] == 2400


def test_when_nothing_fits_the_task_fails_early_naming_the_deadline():
    with pytest.raises(RequestValidationError) as refused:
        finish_by.plan(
            TRAINING, training_request("x", GPU_PAIR), finish_by=NOW.add(minutes=30), now=NOW, history=no_history
        )
    problems = refused.value.problems
    assert problems[0] == "no preference can finish by finish_by=2026-11-30T02:30:00Z (30m00s from now)"
    assert len(problems) == 4 and problems[-1] == "no SageMaker job was created"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-12-01T06:00:00+00:00", pendulum.datetime(2026, 12, 1, 6, tz="UTC")),
        (" 2026-12-01T07:00:00+01:00 ", pendulum.datetime(2026, 12, 1, 6, tz="UTC")),
        (dt.datetime(2026, 12, 1, 6, tzinfo=dt.UTC), pendulum.datetime(2026, 12, 1, 6, tz="UTC")),
        (pendulum.datetime(2026, 12, 1, 6, tz="Europe/Paris"), pendulum.datetime(2026, 12, 1, 5, tz="UTC")),
    ],
)
def test_deadlines_are_read_as_utc_times(value, expected):
    assert finish_by.deadline_of(value) == expected


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("tomorrow-ish", "finish_by must be a datetime or an ISO 8601 time"),
        (6, "finish_by must be a datetime"),
        (dt.datetime(2026, 12, 1, 6), "has no time zone"),
    ],
)
def test_bad_deadlines_are_refused(value, named):
    with pytest.raises(RequestValidationError, match=named):
        finish_by.deadline_of(value)


def test_a_template_is_left_for_rendering():
    assert finish_by.judged("{{ data_interval_end.add(hours=6) }}") == "{{ data_interval_end.add(hours=6) }}"


def test_the_ledger_history_is_the_median_of_this_tasks_completed_runs_per_configuration(tmp_path, monkeypatch):
    from airflow_sm_prefs.evidence import ledger_writing
    from tests.unit.test_report import entry

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}")
    for written in (
        entry("a", 1, run=600.0),
        entry("b", 1, run=900.0),
        entry("c", 1, run=1200.0),
        entry("d", 1, outcome="failed_after_start", run=60.0),  # not a completed run
        entry("e", 1, run=60.0, task_id="other_task"),  # another task's
        entry("f", 0, run=3000.0),
    ):
        assert ledger_writing.write(written)  # type: ignore[arg-type]
    history = finish_by.ledger_history("nightly", "fine_tune", TRAINING)
    assert history("ml.p4d.24xlarge", 2) == (900.0, 3)
    assert history("ml.p5.48xlarge", 1) == (3000.0, 1)
    assert history("ml.p4d.24xlarge", 1) is None


def _run(kind, on_violation="drop"):
    from types import SimpleNamespace

    from airflow_sm_prefs.preflight.check import Run

    ti = SimpleNamespace(dag_id="nightly", task_id="fine_tune")
    return Run(kind, {"ti": ti}, account=None, log=TaskLog(), on_violation=on_violation)  # type: ignore[arg-type]


def _p4d_took_ten_minutes(asked: list):
    def history_of(dag_id: str, task_id: str, kind):
        asked.append((dag_id, task_id, kind.name))
        return lambda instance_type, count: (600.0, 3) if (instance_type, count) == ("ml.p4d.24xlarge", 2) else None

    return history_of


def test_the_check_is_on_only_with_a_deadline_and_reads_it_as_utc():
    assert finish_by.FinishesBy.from_arguments(TRAINING, {}) is None
    assert finish_by.FinishesBy.from_arguments(TRAINING, {"finish_by": None}) is None
    templated = finish_by.FinishesBy.from_arguments(TRAINING, {"finish_by": "{{ data_interval_end }}"})
    assert templated == finish_by.FinishesBy("{{ data_interval_end }}")
    given = finish_by.FinishesBy.from_arguments(TRAINING, {"finish_by": "2026-11-30T06:00:00+01:00"})
    assert given == finish_by.FinishesBy(pendulum.datetime(2026, 11, 30, 5, 0, tz="UTC"))
    with pytest.raises(RequestValidationError, match="finish_by must be a datetime"):
        finish_by.FinishesBy.from_arguments(TRAINING, {"finish_by": "tomorrow morning"})


def test_before_create_drops_what_cannot_finish_and_sagemaker_holds_the_bound(monkeypatch):
    from airflow_sm_prefs.preflight.check import Listed

    asked: list = []
    monkeypatch.setattr(finish_by, "ledger_history", _p4d_took_ten_minutes(asked))
    run = _run(TRAINING)
    given = training_request("x", GPU_PAIR)  # MaxRuntimeInSeconds 3600: the p5 cannot finish in 50 minutes
    monkeypatch.setattr(pendulum, "now", lambda tz=None: NOW)
    listed = finish_by.FinishesBy(NOW.add(minutes=50)).before_create(run, Listed.of(given))
    assert asked == [("nightly", "fine_tune", "training")]
    (dropped,) = listed.dropped
    assert dropped["rank"] == 0 and dropped["reason"].startswith("preference #1 (1 x ml.p5.48xlarge): expected to")
    assert [e["InstanceType"] for e in listed.request["ResourceConfig"]["InstancePreferences"]] == ["ml.p4d.24xlarge"]
    assert listed.request["StoppingCondition"]["MaxPendingTimeInSeconds"] == 40 * 60 and listed.pending_until is None
    assert given == training_request("x", GPU_PAIR)  # the caller's request is untouched
    assert ("warning", f"Dropped {dropped['reason']}") in run.log.said
    assert run.log.said[-1] == (
        "info",
        "finish_by=2026-11-30T02:50:00Z: the job may wait for capacity 40m00s, until 2026-11-30T02:40:00Z (the "
        "longest expected run kept: 10m00s), as MaxPendingTimeInSeconds",
    )


def test_before_create_leaves_the_bound_to_the_task_for_processing_and_keeps_the_guardrails_reasons(monkeypatch):
    from airflow_sm_prefs.preflight.check import Listed

    monkeypatch.setattr(finish_by, "ledger_history", _p4d_took_ten_minutes([]))
    run = _run(PROCESSING)
    given = processing_request("x", GPU_PAIR)
    objected = Listed.of(given).objected({0: "preference #1: over the cost cap"})
    monkeypatch.setattr(pendulum, "now", lambda tz=None: NOW)
    listed = finish_by.FinishesBy(NOW.add(hours=3)).before_create(run, objected)
    # The guardrail dropped the first already: it is not judged again (its hour would leave 2 h), and keeps its
    # own reason.
    assert [(d["rank"], d["reason"]) for d in listed.dropped] == [(0, "preference #1: over the cost cap")]
    assert "MaxPendingTimeInSeconds" not in listed.request.get("StoppingCondition", {})
    assert listed.pending_until == pendulum.datetime(2026, 11, 30, 4, 50)
    assert run.log.said[-1][1].endswith("(the longest expected run kept: 10m00s), enforced by this task")


def test_an_entry_expected_to_run_exactly_the_time_left_cannot_finish_and_a_past_deadline_leaves_none():
    request = training_request("x", GPU_PAIR)  # MaxRuntimeInSeconds 3600
    with pytest.raises(RequestValidationError) as refused:
        finish_by.plan(TRAINING, request, finish_by=NOW.add(hours=1), now=NOW, history=no_history)
    assert refused.value.problems[0] == (
        "no preference can finish by finish_by=2026-11-30T03:00:00Z (1h00m00s from now)"
    )
    with pytest.raises(RequestValidationError) as past:
        finish_by.plan(TRAINING, request, finish_by=NOW.subtract(minutes=5), now=NOW, history=no_history)
    assert past.value.problems[:2] == [
        "no preference can finish by finish_by=2026-11-30T01:55:00Z (0s from now)",
        "preference #1 (1 x ml.p5.48xlarge): expected to run 1h00m00s (MaxRuntimeInSeconds, as the ledger has no "
        "completed job of this task on it), and only 0s remain until finish_by=2026-11-30T01:55:00Z",
    ]


def test_sagemaker_holds_a_bound_of_exactly_its_floor_and_a_request_without_a_stopping_condition_gets_one():
    request = training_request("x", GPU_PAIR)
    del request["StoppingCondition"]  # MaxRuntimeInSeconds then defaults to a day: the ledger says ten minutes
    deadline = finish_by.plan(
        TRAINING, request, finish_by=NOW.add(minutes=40), now=NOW, history=lambda t, c: (600.0, 3)
    )
    assert deadline.pending_seconds == finish_by.SERVICE_MIN_PENDING == 1800
    sent, pending_until = finish_by.applied(TRAINING, request, deadline, NOW)
    assert sent["StoppingCondition"] == {"MaxPendingTimeInSeconds": 1800} and pending_until is None
    assert "StoppingCondition" not in request


def test_before_create_reads_the_clock_in_utc_itself(monkeypatch):
    """No frozen clock here: the check's own ``now`` (a zone SageMaker's and the ledger's times are in)."""
    from airflow_sm_prefs.preflight.check import Listed

    monkeypatch.setattr(finish_by, "ledger_history", lambda dag_id, task_id, kind: no_history)
    deadline = pendulum.now("UTC").add(hours=5)
    listed = finish_by.FinishesBy(deadline).before_create(_run(TRAINING), Listed.of(training_request("x", GPU_PAIR)))
    bound = listed.request["StoppingCondition"]["MaxPendingTimeInSeconds"]
    assert 4 * 3600 - 60 <= bound <= 4 * 3600


def test_the_ledger_history_reads_only_this_dags_completed_runs_that_say_what_ran(tmp_path, monkeypatch):
    from airflow_sm_prefs.evidence import ledger_writing
    from tests.unit.test_report import entry

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}")
    unmeasured = entry("a", 1, run=None)  # completed, yet with no run time: read past, not stopped at
    another_dags = {**entry("b", 1, run=60.0), "dag_id": "weekly"}
    no_count = {**entry("c", 1, run=300.0), "selected_instance_count": None}
    for written in (unmeasured, another_dags, entry("d", 1, run=700.0), no_count):
        assert ledger_writing.write(written)  # type: ignore[arg-type]
    history = finish_by.ledger_history("nightly", "fine_tune", TRAINING)
    assert history("ml.p4d.24xlarge", 2) == (700.0, 1)
    assert history("ml.p4d.24xlarge", 0) == (300.0, 1), "a count the ledger lacks is read as 0, never as 1"
    assert history("ml.p4d.24xlarge", 1) is None
