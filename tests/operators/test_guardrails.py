"""Guardrails before submission, against the emulator: the quota preflight (Service Quotas on the same
endpoint) and cost caps (the price table), refusing or dropping entries before any job exists."""

from __future__ import annotations

import contextlib
import json

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred

from airflow_sm_prefs.preflight import quotas
from airflow_sm_prefs.request.preferences import RequestValidationError
from airflow_sm_prefs.surface.operators import NoCapacityError
from airflow_sm_prefs.task.attempts import STATE_KEY
from sm_prefs_devkit.emulator.scenario import parse_faults
from tests.helpers import FakeTI
from tests.operators.test_operator import (
    FakeStore,
    _creates,
    context,
    preflight_of,
    processing_operator,
    training_operator,
)

pytestmark = pytest.mark.emulator

# quota-short: the account's ml.p4d.24xlarge quota is 1.
SHORT_SECOND = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
    {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
]


@pytest.fixture(autouse=True)
def _fresh_quota_cache():
    quotas.forget()
    yield
    quotas.forget()


@pytest.fixture
def price_table(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(path))
    training = {"ml.p5.48xlarge": 100, "ml.p4d.24xlarge": 40, "ml.g5.48xlarge": 20}
    document = {
        "format": 1,
        "source": "test",
        "retrieved": "2026-11-30",
        "prices": {"us-east-1": {"training": training, "processing": {"ml.g5.12xlarge": 8}}},
    }
    path.write_text(json.dumps(document))
    return path


def test_a_short_quota_fails_before_any_create_naming_the_entry_and_the_quota(start_emulator, aws_connection):
    server = start_emulator("quota-short")
    operator = training_operator(aws_connection(server), preferences=SHORT_SECOND)
    with pytest.raises(AirflowFailException) as refused:
        operator.execute(context())
    message = str(refused.value)
    assert "preference #2 (2 x ml.p4d.24xlarge)" in message
    assert "'ml.p4d.24xlarge for training job usage' is 1, fewer than the 2 asked for" in message
    assert "request-service-quota-increase" in message and "no SageMaker job was created" in message
    assert _creates(server) == 0 and len(server.engine.jobs) == 0


def test_drop_runs_on_the_remaining_entries_and_records_what_it_dropped(start_emulator, aws_connection, task_log):
    server = start_emulator("quota-short")
    operator = training_operator(
        aws_connection(server), preferences=SHORT_SECOND, on_violation="drop", deferrable=False
    )
    ti = FakeTI()
    ran = context(ti)
    result = operator.execute(ran)
    (job,) = server.engine.jobs.values()
    assert [p["InstanceType"] for p in job.request["ResourceConfig"]["InstancePreferences"]] == [
        "ml.p5.48xlarge",
        "ml.g5.48xlarge",
    ]
    (dropped,) = result["dropped_preferences"]
    assert dropped["rank"] == 1 and dropped["entry"] == SHORT_SECOND[1]
    assert "quota 'ml.p4d.24xlarge for training job usage' is 1" in dropped["reason"]
    assert preflight_of(ran)["dropped_preferences"] == result["dropped_preferences"]
    assert "dropped_preferences" not in ti.xcoms, "no XCom of its own: the claim keeps it"
    assert any(message.startswith("Dropped preference #2") for message in task_log.messages)


def test_a_processing_list_is_preflighted_against_processing_quotas(start_emulator, aws_connection, tmp_path):
    scenario = tmp_path / "short-g5.yaml"
    scenario.write_text("name: short-g5\ndefault_capacity: 8\nquotas: {ml.g5.12xlarge: 2}\n")
    server = start_emulator(str(scenario))
    operator = processing_operator(aws_connection(server), preferences=[("ml.g6.12xlarge", 3), ("ml.g5.12xlarge", 3)])
    with pytest.raises(
        AirflowFailException, match=r"#2 \(3 x ml\.g5\.12xlarge\).*'ml\.g5\.12xlarge for processing job usage' is 2"
    ):
        operator.execute(context())
    assert _creates(server) == 0


def test_an_identity_that_may_not_read_quotas_is_told_once_and_goes_on(start_emulator, aws_connection, task_log):
    server = start_emulator("quota-short")
    server.emulator.faults = parse_faults({"deny": ["ListServiceQuotas"]})
    operator = training_operator(aws_connection(server), preferences=SHORT_SECOND)
    with pytest.raises(AirflowFailException, match="ResourceLimitExceeded"):
        operator.execute(context())  # SageMaker still checks the quota at create time
    skipped = [message for message in task_log.messages if message.startswith("Quota preflight skipped")]
    assert len(skipped) == 1 and "may not read SageMaker's quotas" in skipped[0]
    assert server.engine.calls["ServiceQuotasV20190624.ListServiceQuotas"] == 1


def test_the_quota_listing_is_read_once_for_many_tasks(start_emulator, aws_connection):
    server = start_emulator("ample")
    conn = aws_connection(server)
    for name in ("a", "b", "c"):
        operator = training_operator(conn, job_name=f"cached-{name}")
        with pytest.raises(TaskDeferred):  # the job exists
            operator.execute(context())
    assert server.engine.calls["ServiceQuotasV20190624.ListServiceQuotas"] == 1
    assert _creates(server) == 3


def test_an_hourly_cost_cap_refuses_the_entries_above_it(start_emulator, aws_connection, price_table):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server), max_hourly_cost_usd=90)
    with pytest.raises(AirflowFailException) as refused:
        operator.execute(context())
    assert "preference #1 (1 x ml.p5.48xlarge): costs $100.00 an hour" in str(refused.value)
    assert "max_hourly_cost_usd=$90.00" in str(refused.value)
    assert "preference #2" not in str(refused.value)  # 2 x $40 = $80 an hour fits
    assert _creates(server) == 0


def test_a_worst_case_cost_cap_counts_max_runtime(start_emulator, aws_connection, price_table):
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server), max_cost_usd="{{ params.budget }}", on_violation="drop", deferrable=False
    )
    operator.max_cost_usd = "90"  # as rendered; MaxRuntimeInSeconds is 1 hour (tests.helpers)
    ti = FakeTI()
    result = operator.execute(context(ti))
    # p5: $100 x 1 h > $90, dropped; 2 x p4d: $80 x 1 h fits.
    assert [d["rank"] for d in result["dropped_preferences"]] == [0]
    assert "may cost $100.00" in result["dropped_preferences"][0]["reason"]
    assert result["selected_instance_type"] == "ml.p4d.24xlarge"


def test_a_cap_with_no_known_price_is_a_violation_not_a_pass(start_emulator, aws_connection):
    server = start_emulator("ample")  # the shipped table has no prices
    operator = training_operator(aws_connection(server), max_hourly_cost_usd=1000)
    with pytest.raises(AirflowFailException, match=r"no on-demand price for ml\.p5\.48xlarge"):
        operator.execute(context())
    assert _creates(server) == 0


def test_dropping_everything_fails_naming_every_entry(start_emulator, aws_connection, price_table):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server), max_hourly_cost_usd=10, on_violation="drop")
    with pytest.raises(AirflowFailException) as refused:
        operator.execute(context())
    assert "preference #1" in str(refused.value) and "preference #2" in str(refused.value)
    assert "every preference was dropped" in str(refused.value)
    assert _creates(server) == 0


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"max_hourly_cost_usd": -1}, "max_hourly_cost_usd must be a positive number"),
        ({"max_cost_usd": "lots"}, "max_cost_usd must be a positive number"),
        ({"max_cost_usd": float("nan")}, "max_cost_usd must be a positive number"),
        ({"max_hourly_cost_usd": True}, "max_hourly_cost_usd must be a positive number"),
        ({"on_violation": "skip"}, "on_violation must be 'fail' or 'drop'"),
        ({"quota_preflight": "yes"}, "quota_preflight must be True or False"),
    ],
)
def test_bad_guardrail_arguments_fail_at_parse_time(arguments, named):
    with pytest.raises(RequestValidationError, match=named):
        training_operator("unused", **arguments)


# -- requires= and finish_by= against the emulator --------------------------------------------------------------


def test_requires_with_drop_runs_on_the_types_that_meet_it(start_emulator, aws_connection):
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server),
        preferences=[("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1), ("ml.p4d.24xlarge", 1)],
        requires={"min_gpu_memory_gib": 40},
        on_violation="drop",
    )
    with pytest.raises(TaskDeferred):
        operator.execute(context())
    (job,) = server.engine.jobs.values()
    kept = [p["InstanceType"] for p in job.request["ResourceConfig"]["InstancePreferences"]]
    assert kept == ["ml.p5.48xlarge", "ml.p4d.24xlarge"]


def test_finish_by_sets_the_pending_bound_sagemaker_enforces(start_emulator, aws_connection):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server), finish_by="{{ data_interval_end.add(hours=6) }}")
    operator.finish_by = pendulum.now("UTC").add(hours=3).to_iso8601_string()  # as rendered
    # Deferred, or ended already: at 60x a busy machine may take the job's five virtual minutes to look at it
    # after the create. What was sent is what counts.
    with contextlib.suppress(TaskDeferred):
        operator.execute(context())
    (job,) = server.engine.jobs.values()
    # 3 hours left, the longest expected run (no history: MaxRuntimeInSeconds) is 1 hour.
    assert 2 * 3600 - 60 <= job.request["StoppingCondition"]["MaxPendingTimeInSeconds"] <= 2 * 3600


def test_finish_by_below_the_floor_is_enforced_by_the_task_and_kept_for_a_retry(start_emulator, aws_connection):
    # The scenario frees capacity ten virtual minutes after it starts (ten seconds here): a busy machine can take
    # that long to create the job, which then never waits. With the clock stopped, it waits for this test.
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    operator = training_operator(aws_connection(server))
    now = pendulum.now("UTC")
    operator.finish_by = now.add(minutes=80)
    store = FakeStore()
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(context(FakeTI(), store))
    (job,) = server.engine.jobs.values()
    assert "MaxPendingTimeInSeconds" not in job.request["StoppingCondition"]
    until = pendulum.parse(deferred.value.trigger.pending_deadline)
    assert abs((until - now.add(minutes=20)).total_seconds()) < 60  # 80 minutes less an hour's expected run
    tags = {tag["Key"]: tag["Value"] for tag in job.request["Tags"]}
    assert pendulum.parse(tags["sm_prefs:pending_until"]) == until  # where a try with no claim to read finds it
    # A retry reattaches to the running job: the deadline is not judged again (nothing would fit by now),
    # and the bound the job was created with is kept.
    retry = training_operator(aws_connection(server))
    retry.finish_by = pendulum.now("UTC").add(minutes=10)
    with pytest.raises(TaskDeferred) as again:
        retry.execute(context(FakeTI(try_number=2), store))
    assert pendulum.parse(again.value.trigger.pending_deadline) == until
    assert len(server.engine.jobs) == 1
    event = {
        "status": "pending_timeout",
        "job_name": job.name,
        "description": {},
        "announced": False,
        "pending_deadline": again.value.trigger.pending_deadline,  # as the trigger sends it back
    }
    with pytest.raises(NoCapacityError, match="got no capacity in time to finish by finish_by"):
        retry.execute_complete(context(FakeTI(try_number=2), store), event)


def test_finish_by_that_nothing_can_meet_fails_before_any_create(start_emulator, aws_connection):
    server = start_emulator("ample")
    operator = training_operator(aws_connection(server))
    operator.finish_by = pendulum.now("UTC").add(minutes=30)
    with pytest.raises(AirflowFailException, match="no preference can finish by finish_by="):
        operator.execute(context())
    assert _creates(server) == 0


def test_a_bad_finish_by_fails_at_parse_time():
    with pytest.raises(RequestValidationError, match="finish_by must be a datetime or an ISO 8601 time"):
        training_operator("unused", finish_by="at dawn")


def test_finish_by_after_a_guardrail_drop_names_entries_by_their_place_in_the_users_list(
    start_emulator, aws_connection, monkeypatch
):
    """requires= drops #1; the deadline then drops #3 (its history says two hours). The record names #1 and
    #3, as the user wrote the list, not the places they had in what the guardrails left."""
    from airflow_sm_prefs.preflight import finish_by as finish_by_module

    history = {("ml.p4d.24xlarge", 1): (2 * 3600.0, 5)}
    monkeypatch.setattr(finish_by_module, "ledger_history", lambda *_: lambda kind, count: history.get((kind, count)))
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server),
        preferences=[("ml.g5.48xlarge", 1), ("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 1)],
        requires={"min_gpu_memory_gib": 40},
        on_violation="drop",
    )
    operator.finish_by = pendulum.now("UTC").add(minutes=90)  # MaxRuntimeInSeconds (1 hour) fits, 2 hours not
    ran = context(FakeTI())
    with pytest.raises(TaskDeferred):
        operator.execute(ran)
    (job,) = server.engine.jobs.values()
    assert [p["InstanceType"] for p in job.request["ResourceConfig"]["InstancePreferences"]] == ["ml.p5.48xlarge"]
    dropped = preflight_of(ran)["dropped_preferences"]
    assert [(d["rank"], d["entry"]["InstanceType"]) for d in dropped] == [(0, "ml.g5.48xlarge"), (2, "ml.p4d.24xlarge")]
    assert "preference #3 (1 x ml.p4d.24xlarge): expected to run 2h" in dropped[1]["reason"]


def test_a_retry_that_reattaches_records_what_the_first_try_dropped(start_emulator, aws_connection):
    """What preflight decided is kept with the claim: a later try starts with no XCom and does not judge the
    list again, and its record still names the dropped entry."""
    server = start_emulator("quota-short")
    store = FakeStore()
    first = training_operator(aws_connection(server), preferences=SHORT_SECOND, on_violation="drop")
    with pytest.raises(TaskDeferred):
        first.execute(context(FakeTI(try_number=1), store))
    store[STATE_KEY]["phase"] = "submitted"  # as if the worker died before deferring
    retry = training_operator(aws_connection(server), preferences=SHORT_SECOND, on_violation="drop", deferrable=False)
    result = retry.execute(context(FakeTI(try_number=2), store))
    assert _creates(server) == 1
    (dropped,) = result["dropped_preferences"]
    assert dropped["rank"] == 1 and "quota 'ml.p4d.24xlarge for training job usage' is 1" in dropped["reason"]


def test_a_drop_that_leaves_only_cpu_types_warns_that_the_pending_bound_is_moot(
    start_emulator, aws_connection, task_log
):
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server),
        preferences=[("ml.p5.48xlarge", 1), ("ml.m5.xlarge", 1)],
        max_pending=3600,
        requires={"accelerator": "none"},
        on_violation="drop",
    )
    with pytest.raises(TaskDeferred):
        operator.execute(context())
    assert any(m.startswith("MaxPendingTimeInSeconds has no effect") for m in task_log.messages)
