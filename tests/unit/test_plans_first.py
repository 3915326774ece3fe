"""The pure decisions about Flexible Training Plans: how long a job may wait for one, why a plan cannot take an
entry, and which plan ``training_plans="auto"`` puts first; and what is read from SageMaker's answers."""

from __future__ import annotations

import copy
import datetime as dt

import pendulum
import pytest

from airflow_sm_prefs.preflight import plans_first
from airflow_sm_prefs.preflight.entries import Entry
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.training_plans import Offering, PlanState
from tests.helpers import TaskLog

NOW = dt.datetime(2026, 12, 4, 20, 0, tzinfo=dt.UTC)
P5 = "ml.p5.48xlarge"


def _plan(name: str = "p", status: str = "Active", total: int = 2, available: int = 2, **extra: object) -> PlanState:
    fields: dict = {
        "arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/{name}",
        "name": name,
        "status": status,
        "instance_type": P5,
        "total": total,
        "available": available,
        "in_use": total - available,
        "start": NOW - dt.timedelta(hours=1),
        "end": NOW + dt.timedelta(days=1),
        "upfront_fee": 100.0,
        "currency": "USD",
    }
    return PlanState(**{**fields, **extra})


ENTRY = Entry(0, {"InstanceType": P5, "InstanceCount": 2}, P5, 2)


def test_the_pending_bound_is_the_requests_the_default_or_finish_bys():
    """The one rule preflight (which plan can take the job) and the task (when its wait ends) both read."""
    from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
    from airflow_sm_prefs.request.pending_limit import pending_limit

    def seconds(request, until=None, kind=TRAINING, max_pending=None):
        return pending_limit(kind, request, start=NOW, max_pending=max_pending, until=until).wait.total_seconds()

    assert seconds({}) == 2 * 86400
    assert seconds({"StoppingCondition": {"MaxPendingTimeInSeconds": 7200}}) == 7200
    sooner = NOW + dt.timedelta(minutes=30)
    assert seconds({"StoppingCondition": {"MaxPendingTimeInSeconds": 7200}}, sooner) == 1800
    assert seconds({}, NOW - dt.timedelta(hours=1)) == 0
    # Processing: SageMaker enforces none, the task does (max_pending); the request's field is not the bound.
    assert seconds({"StoppingCondition": {"MaxPendingTimeInSeconds": 7200}}, kind=PROCESSING) == 2 * 86400
    assert seconds({}, kind=PROCESSING, max_pending=900) == 900
    limit = pending_limit(PROCESSING, {}, start=NOW, max_pending=900, until=sooner)
    assert limit.task_deadline == NOW + dt.timedelta(minutes=15), "the earlier of max_pending and finish_by"
    assert pending_limit(TRAINING, {}, start=NOW, max_pending=900, until=None).task_deadline is None


@pytest.mark.parametrize(
    ("plan", "reason"),
    [
        (_plan(), None),
        (_plan(available=1), "is full: 1 of its 2 instances in use, 1 free"),
        (_plan(total=1, available=1), "reserves 1 instance(s), fewer than the 2 asked for"),
        (_plan(instance_type="ml.p4d.24xlarge"), f"reserves ml.p4d.24xlarge, not {P5}"),
        (_plan(status="Expired"), f"expired at {(NOW + dt.timedelta(days=1)).isoformat()}"),
        (_plan(end=NOW), f"expired at {NOW.isoformat()}"),  # SageMaker has not said so yet; its end has come
        (
            _plan(end=NOW + dt.timedelta(minutes=30)),
            f"ends within 30 minutes (at {(NOW + dt.timedelta(minutes=30)).isoformat()}): SageMaker takes",
        ),
        (_plan(end=NOW + dt.timedelta(minutes=31)), None),  # a minute of full access left
        (_plan(status="Failed"), "is Failed"),
        (_plan(status="Scheduled", available=0, start=NOW + dt.timedelta(hours=47)), None),
        (_plan(status="Pending", available=0, start=NOW + dt.timedelta(hours=1)), None),
        (
            _plan(status="Scheduled", available=0, start=NOW + dt.timedelta(hours=49)),
            f"is Scheduled and not Active until {(NOW + dt.timedelta(hours=49)).isoformat()}, after the job would "
            "stop waiting (48h00m00s from now)",
        ),
        (_plan(status="Scheduled", available=0, start=None), "is Scheduled and not Active until an unknown time"),
    ],
)
def test_why_a_plan_cannot_take_an_entry(plan, reason):
    found = plans_first.unusable(plan, ENTRY, NOW, 2 * 86400)
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.startswith(reason), found


def test_the_roomiest_active_plan_is_put_first_on_the_earliest_entry_that_fits():
    request = {
        "ResourceConfig": {
            "InstancePreferences": [
                {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
                {"InstanceType": P5, "InstanceCount": 2},
            ]
        }
    }
    plans = [
        _plan("later", status="Scheduled", available=0, start=NOW + dt.timedelta(hours=2)),
        _plan("some-room", total=4, available=2),
        _plan("more-room", total=4, available=3),
    ]
    given = copy.deepcopy(request)
    changed, choice = plans_first.put_first(TRAINING, request, plans, now=NOW, pending=86400)
    assert choice.plan_arn is not None and choice.plan_arn.endswith("/more-room")
    assert changed["ResourceConfig"]["InstancePreferences"] == [
        {"InstanceType": P5, "InstanceCount": 2, "TrainingPlanArns": [choice.plan_arn]},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
    ]
    assert request == given, "the request given is left as it is"
    assert choice.notes == (
        "training plan more-room put first for preference #2 (2 x ml.p5.48xlarge): 3 of its 4 "
        "reserved instances free now",
    )


def test_a_list_that_names_a_plan_is_left_as_written():
    request = {
        "ResourceConfig": {
            "InstancePreferences": [{"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [_plan("mine").arn]}]
        }
    }
    changed, choice = plans_first.put_first(TRAINING, request, [_plan("other")], now=NOW, pending=86400)
    assert changed is request and choice.plan_arn is None
    assert choice.notes == ("the list already names a training plan; it is left as written",)


def test_a_uniform_count_is_kept_on_the_entry_moved_first():
    request = {
        "ResourceConfig": {
            "InstanceCount": 2,
            "InstancePreferences": [{"InstanceType": "ml.g5.48xlarge"}, {"InstanceType": P5}],
        }
    }
    changed, choice = plans_first.put_first(TRAINING, request, [_plan()], now=NOW, pending=86400)
    assert changed["ResourceConfig"] == {
        "InstanceCount": 2,
        "InstancePreferences": [
            {"InstanceType": P5, "TrainingPlanArns": [choice.plan_arn]},
            {"InstanceType": "ml.g5.48xlarge"},
        ],
    }


def test_what_is_read_of_a_plan_and_an_offering():
    described = {
        "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/x",
        "TrainingPlanName": "x",
        "Status": "Active",
        "StartTime": NOW,
        "EndTime": NOW + dt.timedelta(hours=24),
        "UpfrontFee": "1440.00",
        "CurrencyCode": "USD",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 1,
        "InUseInstanceCount": 1,
        "ReservedCapacitySummaries": [{"InstanceType": P5, "TotalInstanceCount": 2}],
    }
    plan = PlanState.of(described)
    assert (plan.instance_type, plan.total, plan.available, plan.in_use, plan.upfront_fee) == (P5, 2, 1, 1, 1440.0)
    assert plan.instance_hours() == 48.0
    assert PlanState.of({**described, "UpfrontFee": "n/a"}).upfront_fee is None
    assert PlanState.of({**described, "UpfrontFee": "nan"}).upfront_fee is None
    offered = Offering.of(
        {
            "TrainingPlanOfferingId": "tpo-1",
            "DurationHours": 24,
            "DurationMinutes": 30,
            "UpfrontFee": "99.5",
            "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [
                {"InstanceType": P5, "InstanceCount": 2, "StartTime": NOW, "EndTime": NOW + dt.timedelta(hours=24.5)}
            ],
        }
    )
    assert (offered.count, offered.duration_hours, offered.upfront_fee) == (2, 24.5, 99.5)


def test_only_the_reserve_command_buys_a_plan():
    """Nothing a DAG or an operator runs calls CreateTrainingPlan: the one call is ``plans reserve``'s."""
    from pathlib import Path

    package = Path(plans_first.__file__).resolve().parents[1]
    callers = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "create_training_plan" in path.read_text() or "CreateTrainingPlan(" in path.read_text()
    )
    assert callers == ["sagemaker/plan_purchase.py"]
    buyers = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py") if "plan_purchase" in path.read_text()
    )
    assert buyers == ["surface/plans_commands.py"]  # the reserve command, alone


def test_training_plans_is_auto_or_off_and_for_training_alone():
    from airflow_sm_prefs.request.jobs import PROCESSING
    from airflow_sm_prefs.request.preferences import RequestValidationError

    assert plans_first.PlansFirst.from_arguments(TRAINING, {}) is None
    assert plans_first.PlansFirst.from_arguments(TRAINING, {"training_plans": "auto"}) == plans_first.PlansFirst()
    with pytest.raises(RequestValidationError, match=r"training_plans must be 'auto' or None, got 'yes'"):
        plans_first.PlansFirst.from_arguments(TRAINING, {"training_plans": "yes"})
    with pytest.raises(RequestValidationError, match=r"training_plans='auto' is for training jobs: .* processing"):
        plans_first.PlansFirst.from_arguments(PROCESSING, {"training_plans": "auto"})


def _run(plans_client):
    from airflow_sm_prefs.preflight.check import Account, Run

    account = Account("us-east-1", quota_client=lambda: None, cache_key=(), plans_client=plans_client)
    return Run(TRAINING, {}, account, TaskLog(), "drop")  # type: ignore[arg-type]


def _request():
    from tests.helpers import training_request

    return training_request("x", [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}, ENTRY.api])


def test_before_create_puts_the_plan_that_can_take_the_job_first_and_says_which(monkeypatch):
    from airflow_sm_prefs.preflight.check import Listed
    from airflow_sm_prefs.sagemaker import training_plans

    made: list[str] = []
    monkeypatch.setattr(training_plans, "account_plans", lambda client: [_plan("full", available=0), _plan("room")])
    monkeypatch.setattr(plans_first.pendulum, "now", lambda tz=None: NOW)
    run = _run(lambda: made.append("client") or "client")
    listed = plans_first.PlansFirst().before_create(run, Listed.of(_request()))
    first, second = listed.request["ResourceConfig"]["InstancePreferences"]
    assert first == {**ENTRY.api, "TrainingPlanArns": [_plan("room").arn]} and "TrainingPlanArns" not in second
    assert listed.training_plan == {
        "plan_arn": _plan("room").arn,
        # The roomiest plan is tried first: the full one is not looked at.
        "notes": [
            "training plan room put first for preference #2 (2 x ml.p5.48xlarge): 2 of its 2 reserved instances "
            "free now"
        ],
    }
    assert [said for level, said in run.log.said if level == "info"] == [
        f"training_plans='auto': {note}" for note in listed.training_plan["notes"]
    ]
    assert made == ["client"]


def test_before_create_weighs_a_plan_starting_against_finish_bys_bound(monkeypatch):
    """A plan that becomes Active after the task's own pending deadline (finish_by) cannot take the job."""
    from airflow_sm_prefs.preflight.check import Listed
    from airflow_sm_prefs.sagemaker import training_plans

    later = _plan("later", status="Scheduled", available=0, start=NOW + dt.timedelta(hours=2))
    monkeypatch.setattr(training_plans, "account_plans", lambda client: [later])
    monkeypatch.setattr(plans_first.pendulum, "now", lambda tz=None: NOW)
    bounded = Listed.of(_request())
    one_hour_on = pendulum.instance(NOW + dt.timedelta(hours=1))
    bounded = type(bounded)(bounded.given, bounded.request, pending_until=one_hour_on)
    listed = plans_first.PlansFirst().before_create(_run(lambda: "client"), bounded)
    assert listed.request == _request() and listed.training_plan is not None
    assert listed.training_plan["plan_arn"] is None
    (note,) = listed.training_plan["notes"]
    assert note.endswith("after the job would stop waiting (1h00m00s from now)")
    unbounded = plans_first.PlansFirst().before_create(_run(lambda: "client"), Listed.of(_request()))
    assert unbounded.training_plan is not None and unbounded.training_plan["plan_arn"] == later.arn


def test_plans_that_cannot_be_read_cost_the_check_with_one_warning_never_the_task(monkeypatch):
    from airflow_sm_prefs.preflight.check import Listed
    from airflow_sm_prefs.sagemaker import training_plans

    def denied(client):
        raise PermissionError("AccessDeniedException: not authorized to perform sagemaker:ListTrainingPlans")

    monkeypatch.setattr(training_plans, "account_plans", denied)
    run = _run(lambda: "client")
    listed = plans_first.PlansFirst().before_create(run, Listed.of(_request()))
    assert listed.request == _request()
    assert listed.training_plan == {"plan_arn": None, "notes": ["the account's training plans could not be read"]}
    (warning,) = [said for level, said in run.log.said if level == "warning"]
    assert warning.startswith(
        "Training plans not checked: could not read them from SageMaker (PermissionError: AccessDeniedException"
    )


def test_a_named_plan_is_asked_for_once_per_create_call_and_a_failure_is_unknown(monkeypatch):
    from airflow_sm_prefs.sagemaker import training_plans

    asked: list[str] = []

    def plan_named(client, arn):
        asked.append(arn)
        if arn.endswith("/broken"):
            raise TimeoutError("read timed out")
        return None if arn.endswith("/gone") else _plan("p")

    monkeypatch.setattr(training_plans, "plan_named", plan_named)
    clients: list[int] = []
    reader = plans_first.PlansReader(lambda: clients.append(1) or "client", TaskLog())
    arn = _plan("p").arn
    assert reader.named(arn) == (True, _plan("p")) and reader.named(arn) == (True, _plan("p"))
    assert reader.named(arn.replace("/p", "/gone")) == (True, None)
    assert reader.named(arn.replace("/p", "/broken")) == (False, None)
    assert asked == [arn, arn.replace("/p", "/gone"), arn.replace("/p", "/broken")] and clients == [1]
    assert len(reader.log.said) == 1 and "TimeoutError: read timed out" in reader.log.said[0][1]


def test_a_plan_expired_with_no_end_says_so_and_one_starting_exactly_when_the_wait_ends_can_take_the_job():
    assert plans_first.unusable(_plan(status="Expired", end=None), ENTRY, NOW, 3600) == "expired"
    at_the_bound = _plan(status="Scheduled", available=0, start=NOW + dt.timedelta(hours=2))
    assert plans_first.unusable(at_the_bound, ENTRY, NOW, 2 * 3600) is None
    assert plans_first.unusable(at_the_bound, ENTRY, NOW, 2 * 3600 - 1) is not None


def test_of_plans_starting_later_the_soonest_is_put_first_and_its_start_is_said():
    request = {"ResourceConfig": {"InstancePreferences": [{"InstanceType": P5, "InstanceCount": 2}]}}
    plans = [
        _plan("a-later", status="Scheduled", available=0, start=NOW + dt.timedelta(hours=3)),
        _plan("b-sooner", status="Scheduled", available=0, start=NOW + dt.timedelta(hours=1)),
    ]
    _, choice = plans_first.put_first(TRAINING, request, plans, now=NOW, pending=86400)
    assert choice.plan_arn is not None and choice.plan_arn.endswith("/b-sooner")
    assert choice.notes == (
        f"training plan b-sooner put first for preference #1 (2 x {P5}): 0 of its 2 reserved instances free from "
        f"{(NOW + dt.timedelta(hours=1)).isoformat()}",
    )


def test_with_no_plan_for_any_listed_type_the_note_names_the_types_once_each():
    request = {
        "ResourceConfig": {
            "InstancePreferences": [
                {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
                {"InstanceType": P5, "InstanceCount": 1},
            ]
        }
    }
    changed, choice = plans_first.put_first(
        TRAINING, request, [_plan(instance_type="ml.p4d.24xlarge")], now=NOW, pending=86400
    )
    assert changed is request and choice.plan_arn is None
    assert choice.notes == ("no training plan of the account reserves a listed type (ml.g5.48xlarge, ml.p5.48xlarge)",)


def test_plans_that_cannot_be_read_are_one_warning_naming_the_permissions_and_the_error_cut_short(monkeypatch):
    from airflow_sm_prefs.sagemaker import training_plans

    def denied(client):
        raise PermissionError("x" * 300)

    monkeypatch.setattr(training_plans, "account_plans", denied)
    log = TaskLog()
    assert plans_first.PlansReader(lambda: "client", log).account_plans() is None
    assert log.said == [
        (
            "warning",
            f"Training plans not checked: could not read them from SageMaker (PermissionError: {'x' * 200}); check "
            "the connection's sagemaker:ListTrainingPlans and sagemaker:DescribeTrainingPlan permissions. SageMaker "
            "still skips a plan that cannot take the job.",
        )
    ]
