"""Flexible Training Plans on the emulator, driven with unmodified boto3 and the AWS CLI over HTTP: offerings,
a plan's life on the emulator's clock, the counts Describe reports, the errors the service gives, and a job's
plan-backed entry that takes the plan's instances only while the plan is Active and has room."""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.local_stack import control
from tests.emulator.test_conformance import _aws
from tests.helpers import boto_client, training_request

pytestmark = pytest.mark.emulator

P5 = "ml.p5.48xlarge"
HOUR = 3600
# Four p5 reservable from one hour after the run starts for 30 days at 30 USD an instance-hour; none on demand.
SUPPLY = f"""
speed: 1
capacity: {{{P5}: 0, ml.p4d.24xlarge: 4}}
runtime_seconds: {{default: 600}}
behaviour: {{training_plan_pending_seconds: 120}}
plan_supply:
  - {{instance_type: {P5}, count: 4, start: 3600, end: 2592000, usd_per_instance_hour: 30}}
"""


@pytest.fixture
def supplied(start_emulator, tmp_path):
    scenario = tmp_path / "supply.yaml"
    scenario.write_text(SUPPLY)
    server = start_emulator(str(scenario))
    return server, boto_client(server.endpoint_url)


def _clock(server) -> dt.datetime:
    return dt.datetime.fromtimestamp(server.engine.clock.now(), dt.UTC)


def _search(client, count: int = 2, hours: int = 24, **extra):
    return client.search_training_plan_offerings(
        InstanceType=P5, InstanceCount=count, DurationHours=hours, TargetResources=["training-job"], **extra
    )["TrainingPlanOfferings"]


def test_a_search_offers_the_supply_on_the_hour_priced_by_instance_hours(supplied):
    server, client = supplied
    offerings = _search(client, count=2, hours=24)
    assert len(offerings) == 3  # three start times, a day apart
    first = offerings[0]
    assert (first["UpfrontFee"], first["CurrencyCode"], first["DurationHours"]) == ("1440.00", "USD", 24)
    capacity = first["ReservedCapacityOfferings"][0]
    assert (capacity["InstanceType"], capacity["InstanceCount"]) == (P5, 2)
    opens = server.engine.clock.origin + HOUR
    assert capacity["StartTime"].timestamp() >= opens and capacity["StartTime"].timestamp() % HOUR == 0
    assert capacity["EndTime"] - capacity["StartTime"] == dt.timedelta(hours=24)
    later = offerings[1]["ReservedCapacityOfferings"][0]["StartTime"]
    assert later - capacity["StartTime"] == dt.timedelta(days=1)


def test_a_search_finds_nothing_beyond_the_supply_or_for_another_type_or_target(supplied):
    _, client = supplied
    assert _search(client, count=5) == []
    assert (
        client.search_training_plan_offerings(
            InstanceType="ml.p4d.24xlarge", InstanceCount=1, DurationHours=24, TargetResources=["training-job"]
        )["TrainingPlanOfferings"]
        == []
    )
    assert (
        client.search_training_plan_offerings(
            InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"]
        )["TrainingPlanOfferings"]
        == []
    )


def test_a_search_keeps_to_the_window_asked_for(supplied):
    server, client = supplied
    after = _clock(server) + dt.timedelta(days=3)
    offerings = _search(client, StartTimeAfter=after, EndTimeBefore=after + dt.timedelta(hours=30))
    assert len(offerings) == 1
    capacity = offerings[0]["ReservedCapacityOfferings"][0]
    assert capacity["StartTime"] >= after and capacity["EndTime"] <= after + dt.timedelta(hours=30)
    assert offerings[0]["RequestedStartTimeAfter"] == after


def test_a_plan_is_pending_then_scheduled_then_active_then_expired(supplied):
    server, client = supplied
    offering = _search(client, count=2, hours=24)[0]
    start = offering["ReservedCapacityOfferings"][0]["StartTime"]
    arn = client.create_training_plan(
        TrainingPlanName="nightly-p5", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    assert arn == "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nightly-p5"
    described = client.describe_training_plan(TrainingPlanName="nightly-p5")
    assert (described["Status"], described["AvailableInstanceCount"], described["UpfrontFee"]) == (
        "Pending",
        0,
        "1440.00",
    )
    control(server.endpoint_url, "advance", {"seconds": 121})
    assert client.describe_training_plan(TrainingPlanName=arn)["Status"] == "Scheduled"
    control(server.endpoint_url, "advance", {"seconds": start.timestamp() - server.engine.clock.now() + 1})
    active = client.describe_training_plan(TrainingPlanName=arn)
    assert (active["Status"], active["TotalInstanceCount"], active["AvailableInstanceCount"]) == ("Active", 2, 2)
    assert (active["DurationHours"], active["ReservedCapacitySummaries"][0]["InstanceType"]) == (24, P5)
    control(server.endpoint_url, "advance", {"seconds": 24 * HOUR})
    expired = client.describe_training_plan(TrainingPlanName=arn)
    assert (expired["Status"], expired["AvailableInstanceCount"]) == ("Expired", 0)


def test_what_the_service_refuses(supplied):
    _, client = supplied
    offering = _search(client, count=4, hours=24)[0]["TrainingPlanOfferingId"]
    with pytest.raises(ClientError) as unknown:
        client.create_training_plan(TrainingPlanName="x", TrainingPlanOfferingId="tpo-never-offered")
    assert unknown.value.response["Error"]["Code"] == "ResourceNotFound"
    client.create_training_plan(TrainingPlanName="all-four", TrainingPlanOfferingId=offering)
    with pytest.raises(ClientError) as taken:  # the same offering again: its capacity is reserved now
        client.create_training_plan(TrainingPlanName="again", TrainingPlanOfferingId=offering)
    assert taken.value.response["Error"]["Code"] == "ResourceNotFound"
    with pytest.raises(ClientError) as same_name:
        client.create_training_plan(TrainingPlanName="ALL-FOUR", TrainingPlanOfferingId=offering)
    assert same_name.value.response["Error"]["Code"] == "ResourceInUse"
    with pytest.raises(ClientError) as missing:
        client.describe_training_plan(TrainingPlanName="nobody-bought-this")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFound"
    with pytest.raises(ClientError) as no_count:
        client.search_training_plan_offerings(InstanceType=P5, TargetResources=["training-job"])
    assert no_count.value.response["Error"]["Code"] == "ValidationException"


def _active_plan(server, client, name: str, count: int) -> str:
    offering = _search(client, count=count, hours=48)[0]
    arn = client.create_training_plan(TrainingPlanName=name, TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])[
        "TrainingPlanArn"
    ]
    start = offering["ReservedCapacityOfferings"][0]["StartTime"].timestamp()
    control(server.endpoint_url, "advance", {"seconds": start - server.engine.clock.now() + 1})
    return arn


def _on_plan_first(arn: str, count: int) -> list[dict]:
    return [
        {"InstanceType": P5, "InstanceCount": count, "TrainingPlanArns": [arn]},
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
    ]


def _selected(client, name: str) -> str:
    return client.describe_training_job(TrainingJobName=name)["ResourceConfig"]["SelectedInstanceType"]


def test_a_job_takes_the_plans_instances_and_gives_them_back(supplied):
    server, client = supplied
    arn = _active_plan(server, client, "two-p5", 2)
    client.create_training_job(**training_request("on-plan", _on_plan_first(arn, 2)))
    assert _selected(client, "on-plan") == P5
    busy = client.describe_training_plan(TrainingPlanName="two-p5")
    assert (busy["InUseInstanceCount"], busy["AvailableInstanceCount"]) == (2, 0)
    client.create_training_job(**training_request("plan-full", _on_plan_first(arn, 1)))
    assert _selected(client, "plan-full") == "ml.p4d.24xlarge"  # the plan is full: on down the list
    summaries = client.list_training_jobs(TrainingPlanArnEquals=arn)["TrainingJobSummaries"]
    assert [summary["TrainingJobName"] for summary in summaries] == ["on-plan"]
    control(server.endpoint_url, "advance", {"seconds": 2 * HOUR})
    assert client.describe_training_job(TrainingJobName="on-plan")["TrainingJobStatus"] == "Completed"
    assert client.describe_training_plan(TrainingPlanName="two-p5")["AvailableInstanceCount"] == 2


def test_a_job_waiting_on_a_scheduled_plan_starts_when_the_plan_does(supplied):
    server, client = supplied
    offering = _search(client, count=1, hours=24)[0]
    arn = client.create_training_plan(
        TrainingPlanName="tomorrow", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    request = training_request("waits", [{"InstanceType": P5, "InstanceCount": 1, "TrainingPlanArns": [arn]}])
    client.create_training_job(**request)
    assert client.describe_training_job(TrainingJobName="waits")["SecondaryStatus"] == "Pending"
    start = offering["ReservedCapacityOfferings"][0]["StartTime"].timestamp()
    control(server.endpoint_url, "advance", {"seconds": start - server.engine.clock.now() + 1})
    assert _selected(client, "waits") == P5


def test_a_plans_instances_are_reclaimed_from_30_minutes_before_its_end(supplied):
    """The developer guide: full access until 30 minutes before the end, then SageMaker terminates what runs on
    the plan. A job still running then fails (E11); a job created in those 30 minutes goes on down its list."""
    server, client = supplied
    arn = _active_plan(server, client, "ending", 1)
    end = client.describe_training_plan(TrainingPlanName="ending")["EndTime"].timestamp()
    reclaimed = end - 1800
    control(server.endpoint_url, "advance", {"seconds": reclaimed - 300 - server.engine.clock.now()})
    client.create_training_job(**training_request("cut-short", _on_plan_first(arn, 1)))  # runs 600 s
    assert _selected(client, "cut-short") == P5
    control(server.endpoint_url, "advance", {"seconds": 301})
    ended = client.describe_training_job(TrainingJobName="cut-short")
    assert ended["TrainingJobStatus"] == "Failed"
    assert ended["FailureReason"].startswith("CapacityError: training plan ending's reserved capacity ends at ")
    assert ended["TrainingEndTime"].timestamp() == pytest.approx(reclaimed, abs=1)
    assert client.describe_training_plan(TrainingPlanName="ending")["InUseInstanceCount"] == 0
    client.create_training_job(**training_request("too-late", _on_plan_first(arn, 1)))
    assert _selected(client, "too-late") == "ml.p4d.24xlarge"


def test_an_entry_asking_more_than_the_plan_holds_is_refused(supplied):
    server, client = supplied
    arn = _active_plan(server, client, "one-p5", 1)
    with pytest.raises(ClientError) as refused:
        client.create_training_job(**training_request("too-big", _on_plan_first(arn, 2)))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "fewer than the 2 asked for" in refused.value.response["Error"]["Message"]
    assert server.engine.job("training", "too-big") is None


def test_listing_filters_by_status_sorts_and_pages(supplied):
    server, client = supplied
    for name, hours in (("b-plan", 24), ("a-plan", 48), ("c-plan", 72)):
        offering = _search(client, count=1, hours=hours)[0]
        client.create_training_plan(TrainingPlanName=name, TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])
    pending = client.list_training_plans(Filters=[{"Name": "Status", "Value": "Pending"}])["TrainingPlanSummaries"]
    assert len(pending) == 3
    by_name = client.list_training_plans(SortBy="TrainingPlanName", SortOrder="Descending")["TrainingPlanSummaries"]
    assert [plan["TrainingPlanName"] for plan in by_name] == ["c-plan", "b-plan", "a-plan"]
    paginator = client.get_paginator("list_training_plans")
    pages = list(paginator.paginate(SortBy="TrainingPlanName", PaginationConfig={"PageSize": 2}))
    assert [[plan["TrainingPlanName"] for plan in page["TrainingPlanSummaries"]] for page in pages] == [
        ["a-plan", "b-plan"],
        ["c-plan"],
    ]
    control(server.endpoint_url, "advance", {"seconds": 121})
    scheduled = client.list_training_plans(Filters=[{"Name": "Status", "Value": "Scheduled"}])
    assert len(scheduled["TrainingPlanSummaries"]) == 3


def test_plans_bought_survive_a_restart(start_emulator, tmp_path):
    scenario = tmp_path / "supply.yaml"
    scenario.write_text(SUPPLY)
    state = tmp_path / "state.json"
    server = start_emulator(str(scenario), state_file=state)
    client = boto_client(server.endpoint_url)
    offering = _search(client, count=4)[0]["TrainingPlanOfferingId"]
    client.create_training_plan(TrainingPlanName="kept", TrainingPlanOfferingId=offering)
    server.stop()
    again = start_emulator(str(scenario), state_file=state)
    client = boto_client(again.endpoint_url)
    assert client.describe_training_plan(TrainingPlanName="kept")["TotalInstanceCount"] == 4
    with pytest.raises(ClientError):  # its capacity stays sold
        client.create_training_plan(TrainingPlanName="twice", TrainingPlanOfferingId=offering)


def test_the_aws_cli_searches_buys_and_describes(supplied):
    server, _ = supplied
    found = _aws(
        server,
        "sagemaker",
        "search-training-plan-offerings",
        "--instance-type",
        P5,
        "--instance-count",
        "1",
        "--duration-hours",
        "24",
        "--target-resources",
        "training-job",
    )
    offering = found["TrainingPlanOfferings"][0]["TrainingPlanOfferingId"]
    _aws(
        server,
        "sagemaker",
        "create-training-plan",
        "--training-plan-name",
        "cli",
        "--training-plan-offering-id",
        offering,
    )
    described = _aws(server, "sagemaker", "describe-training-plan", "--training-plan-name", "cli")
    assert (described["Status"], described["TotalInstanceCount"]) == ("Pending", 1)
