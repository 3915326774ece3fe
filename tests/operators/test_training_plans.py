"""Flexible Training Plans in the operators, against the emulator: ``training_plans="auto"`` puts the account's
plan that can take the job first (or says why none), a plan written into the list that cannot take the job is a
guardrail violation, processing refuses the argument, and nothing an operator does ever buys a plan."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred

from airflow_sm_prefs.request.preferences import RequestValidationError
from sm_prefs_devkit.emulator.scenario import parse_faults
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, FakeTI
from tests.operators.test_operator import _creates, context, preflight_of, processing_operator, training_operator

pytestmark = pytest.mark.emulator

ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/"
P5, P4D = "ml.p5.48xlarge", "ml.p4d.24xlarge"


def _scenario(tmp_path, plans: str, speed: int = 1) -> str:
    """p5 sold out on demand, p4d plentiful; ``plans``: the account's plans, as YAML list items."""
    path = tmp_path / "plans.yaml"
    path.write_text(
        f"speed: {speed}\ncapacity: {{{P5}: 0, {P4D}: 8}}\nruntime_seconds: {{default: 60}}\n"
        f"startup_seconds: 5\ntraining_plans:\n{plans}"
    )
    return str(path)


def _plan(name: str, instance_type: str = P5, count: int = 2, **extra: object) -> str:
    fields = ", ".join(f"{key}: {value}" for key, value in extra.items())
    return (
        f"  - {{arn: '{ARN}{name}', instance_type: {instance_type}, count: {count}{', ' + fields if fields else ''}}}\n"
    )


def _submitted(server) -> list[dict]:
    (job,) = server.engine.jobs.values()
    return job.request["ResourceConfig"]["InstancePreferences"]


def _deferred(server, conn_id: str, ti: FakeTI, **kwargs: object) -> dict:
    """Run the task until it defers (the job exists and the task waits for it); what preflight decided."""
    ran = context(ti)
    with pytest.raises(TaskDeferred):
        training_operator(conn_id, **kwargs).execute(ran)
    return preflight_of(ran)


def test_auto_runs_the_job_on_the_accounts_plan_and_records_it(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("nightly-p5"), speed=60))
    ti = FakeTI()
    result = training_operator(aws_connection(server), training_plans="auto", deferrable=False).execute(context(ti))
    assert (result["selected_instance_type"], result["selected_rank"]) == (P5, 0)  # not the p4d fallback
    assert result["training_plan_arn"] == ARN + "nightly-p5"
    assert result["cost_basis"] == "plan-backed"
    assert result["training_plan"]["plan_arn"] == ARN + "nightly-p5"
    assert result["training_plan"]["notes"][0].startswith("training plan nightly-p5 put first for preference #1")
    assert server.engine.calls["CreateTrainingPlan"] == 0 and server.engine.calls["SearchTrainingPlanOfferings"] == 0


def test_auto_moves_the_entry_of_the_plans_type_to_the_front(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("p4d-pair", P4D, 2)))
    ti = FakeTI()
    decided = _deferred(server, aws_connection(server), ti, training_plans="auto")
    assert _submitted(server) == [
        {"InstanceType": P4D, "InstanceCount": 2, "TrainingPlanArns": [ARN + "p4d-pair"]},
        {"InstanceType": P5, "InstanceCount": 1},
    ]
    assert decided["training_plan"]["plan_arn"] == ARN + "p4d-pair"


@pytest.mark.parametrize(
    ("plan", "advance", "reason"),
    [
        (_plan("full", in_use=2), 0, "training plan full: is full: 2 of its 2 instances in use, 0 free"),
        (_plan("one-p5", count=1), 0, None),  # GPU_PAIR asks 1 x p5: it fits (a count that does not: below)
        (_plan("ended", end=100), 200, "training plan ended: expired at "),
        (_plan("later", start=864000), 0, "training plan later: is Scheduled and not Active until "),
    ],
)
def test_auto_says_why_a_plan_was_not_put_first(start_emulator, aws_connection, tmp_path, plan, advance, reason):
    server = start_emulator(_scenario(tmp_path, plan))
    if advance:
        control(server.endpoint_url, "advance", {"seconds": advance})
    ti = FakeTI()
    choice = _deferred(server, aws_connection(server), ti, training_plans="auto")["training_plan"]
    if reason is None:
        assert choice["plan_arn"] == ARN + "one-p5"
        return
    assert choice["plan_arn"] is None and choice["notes"][0].startswith(reason), choice
    assert _submitted(server) == GPU_PAIR  # the list as the user wrote it


def test_a_plan_too_small_for_the_entry_is_not_put_first(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("one-p4d", P4D, 1)))
    ti = FakeTI()
    decided = _deferred(server, aws_connection(server), ti, training_plans="auto")  # GPU_PAIR asks 2 x p4d
    assert decided["training_plan"]["notes"] == [
        "training plan one-p4d: reserves 1 instance(s), fewer than the 2 asked for"
    ]


def test_a_plan_starting_within_the_pending_bound_is_put_first(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("tonight", start=3600)))
    ti = FakeTI()
    choice = _deferred(server, aws_connection(server), ti, training_plans="auto")["training_plan"]  # bound: 2 days
    assert choice["plan_arn"] == ARN + "tonight"
    assert "free from " in choice["notes"][0]


def test_auto_without_any_plan_of_a_listed_type_says_so(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("g5", "ml.g5.48xlarge", 2)))
    ti = FakeTI()
    decided = _deferred(server, aws_connection(server), ti, training_plans="auto")
    assert decided["training_plan"] == {
        "plan_arn": None,
        "notes": [f"no training plan of the account reserves a listed type ({P4D}, {P5})"],
    }


def test_plans_that_cannot_be_read_cost_the_choice_not_the_task(start_emulator, aws_connection, tmp_path, task_log):
    server = start_emulator(_scenario(tmp_path, _plan("nightly-p5")))
    server.emulator.faults = parse_faults({"deny": ["ListTrainingPlans"]})
    ti = FakeTI()
    decided = _deferred(server, aws_connection(server), ti, training_plans="auto")
    assert decided["training_plan"] == {"plan_arn": None, "notes": ["the account's training plans could not be read"]}
    assert any("sagemaker:ListTrainingPlans" in message for message in task_log.messages)


def _by_hand(name: str) -> list[dict]:
    return [{"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [ARN + name]}, GPU_PAIR[1]]


def test_an_expired_plan_written_by_hand_refuses_the_task_before_any_job(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("last-week", end=100)))
    control(server.endpoint_url, "advance", {"seconds": 200})
    operator = training_operator(aws_connection(server), preferences=_by_hand("last-week"))
    with pytest.raises(AirflowFailException) as refused:
        operator.execute(context())
    assert "preference #1 (1 x ml.p5.48xlarge): training plan last-week expired at" in str(refused.value)
    assert "no SageMaker job was created" in str(refused.value)
    assert _creates(server) == 0


def test_a_full_plan_written_by_hand_is_dropped_and_recorded(start_emulator, aws_connection, tmp_path, task_log):
    server = start_emulator(_scenario(tmp_path, _plan("taken", in_use=2)))
    ti = FakeTI()
    decided = _deferred(server, aws_connection(server), ti, preferences=_by_hand("taken"), on_violation="drop")
    assert _submitted(server) == [GPU_PAIR[1]]
    (dropped,) = decided["dropped_preferences"]
    assert dropped["rank"] == 0 and "training plan taken is full" in dropped["reason"]
    assert any(message.startswith("Dropped preference #1") for message in task_log.messages)


def test_a_plan_that_does_not_exist_is_named(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("real")))
    with pytest.raises(AirflowFailException, match=r"training plan .*typo does not exist in this account and Region"):
        training_operator(aws_connection(server), preferences=_by_hand("typo")).execute(context())
    assert _creates(server) == 0


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sagemaker:us-east-1:999999999999:training-plan/real",  # another account's
        "arn:aws:sagemaker:eu-west-1:123456789012:training-plan/real",  # another Region's
        "arn:aws-cn:sagemaker:us-east-1:123456789012:training-plan/real",  # another partition's
    ],
)
def test_a_plan_arn_of_another_account_region_or_partition_is_not_the_namesake(
    start_emulator, aws_connection, tmp_path, arn
):
    """Plans are looked up by name (every botocore model takes one): the whole ARN is then compared, so the
    account's own plan "real" never stands in for another's, and on_violation="drop" drops the entry."""
    server = start_emulator(_scenario(tmp_path, _plan("real")))
    listed = [{"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [arn]}, GPU_PAIR[1]]
    with pytest.raises(AirflowFailException, match=r"training plan .*/real does not exist in this account and Region"):
        training_operator(aws_connection(server), preferences=listed).execute(context())
    assert _creates(server) == 0
    decided = _deferred(server, aws_connection(server), FakeTI(), preferences=listed, on_violation="drop")
    assert _submitted(server) == [GPU_PAIR[1]] and decided["dropped_preferences"][0]["rank"] == 0


def test_a_usable_plan_written_by_hand_goes_as_written(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, _plan("real")))
    _deferred(server, aws_connection(server), FakeTI(), preferences=_by_hand("real"))
    assert _submitted(server) == _by_hand("real")


def test_processing_refuses_training_plans_and_other_values_are_named():
    with pytest.raises(RequestValidationError, match="training_plans='auto' is for training jobs"):
        processing_operator("unused", training_plans="auto")
    with pytest.raises(RequestValidationError, match="training_plans must be 'auto' or None, got 'always'"):
        training_operator("unused", training_plans="always")
