"""``List*Jobs`` as AWS documents it: tokens that survive inserts and belong to their query, filters that are
either modelled or refused, and the protocol's error codes for values of the wrong type."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, processing_request, training_request

CPU = [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}]


def _pages(client, **query) -> list[str]:
    names, token = [], None
    while True:
        page = client.list_training_jobs(**query, **({"NextToken": token} if token else {}))
        names += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
        token = page.get("NextToken")
        if not token:
            return names


@pytest.mark.parametrize("order", ["Ascending", "Descending"])
def test_a_job_created_between_two_pages_is_neither_repeated_nor_skipped_from_the_old_ones(start_emulator, order):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    for index in range(4):
        client.create_training_job(**training_request(f"old-{index}", GPU_PAIR))
        control(server.endpoint_url, "advance", {"seconds": 5})
    first = client.list_training_jobs(MaxResults=2, SortOrder=order)
    client.create_training_job(**training_request("newcomer", GPU_PAIR))
    rest = []
    token = first["NextToken"]
    while token:
        page = client.list_training_jobs(MaxResults=2, SortOrder=order, NextToken=token)
        rest += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
        token = page.get("NextToken")
    seen = [s["TrainingJobName"] for s in first["TrainingJobSummaries"]] + rest
    assert len(seen) == len(set(seen)), seen
    assert {f"old-{i}" for i in range(4)} <= set(seen)


def test_a_token_from_one_query_is_refused_by_another(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    for index in range(3):
        client.create_training_job(**training_request(f"job-{index}", GPU_PAIR))
    token = client.list_training_jobs(MaxResults=1)["NextToken"]
    with pytest.raises(ClientError, match="Invalid pagination token"):
        client.list_training_jobs(MaxResults=1, NameContains="job", NextToken=token)
    with pytest.raises(ClientError, match="Invalid pagination token"):
        client.list_training_jobs(NextToken="not-a-token")


def test_processing_status_filter_applies_before_paging(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    for index in range(3):
        client.create_processing_job(**processing_request(f"prep-{index}", CPU))
    client.stop_processing_job(ProcessingJobName="prep-0")
    stopping = client.list_processing_jobs(StatusEquals="Stopping", MaxResults=1, SortOrder="Descending")
    assert [s["ProcessingJobName"] for s in stopping["ProcessingJobSummaries"]] == ["prep-0"]


def test_the_training_plan_filter_is_modelled_and_summaries_name_the_plan(start_emulator, tmp_path):
    scenario = tmp_path / "plan.yaml"
    plan = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/team-p5-reservation"
    scenario.write_text(
        f"default_capacity: 8\ntraining_plans:\n  - {{arn: {plan}, instance_type: ml.p5.48xlarge, count: 2}}\n"
    )
    server = start_emulator(str(scenario))
    client = boto_client(server.endpoint_url)
    entries = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "TrainingPlanArns": [plan]}]
    client.create_training_job(**training_request("on-plan", entries))
    client.create_training_job(**training_request("on-demand", GPU_PAIR))
    on_plan = client.list_training_jobs(TrainingPlanArnEquals=plan)["TrainingJobSummaries"]
    assert [(s["TrainingJobName"], s["TrainingPlanArn"]) for s in on_plan] == [("on-plan", plan)]


def test_a_filter_the_emulator_does_not_model_is_refused(start_emulator):
    client = boto_client(start_emulator("ample").endpoint_url)
    with pytest.raises(ClientError) as error:
        client.list_training_jobs(WarmPoolStatusEquals="Available")
    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert "not modelled" in error.value.response["Error"]["Message"]


def _raw_call(server, operation: str, body: dict) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        server.endpoint_url,
        data=json.dumps(body).encode(),
        headers={"X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    "operation, body",
    [
        ("ListTrainingJobs", {"MaxResults": "ten"}),
        ("ListTrainingJobs", {"CreationTimeAfter": "yesterday"}),
        ("ListProcessingJobs", {"LastModifiedTimeBefore": True}),
        ("DescribeTrainingJob", {"TrainingJobName": 42}),
        ("CreateTrainingJob", {**training_request("typed", GPU_PAIR), "EnableManagedSpotTraining": "yes"}),
    ],
    ids=["an integer as text", "a timestamp as a word", "a timestamp as a boolean", "a name as a number", "a flag"],
)
def test_a_value_of_the_wrong_json_type_is_a_serialization_exception(start_emulator, operation, body):
    server = start_emulator("ample")
    status, payload = _raw_call(server, operation, body)
    assert (status, payload["__type"]) == (400, "SerializationException"), payload
    assert server.engine.jobs == {}


def test_a_timestamp_filter_accepts_epoch_seconds_and_iso_text(start_emulator):
    server = start_emulator("ample")
    boto_client(server.endpoint_url).create_training_job(**training_request("dated", GPU_PAIR))
    for after in (0, "1970-01-02T00:00:00Z", "86400"):
        status, payload = _raw_call(server, "ListTrainingJobs", {"CreationTimeAfter": after})
        assert status == 200 and [s["TrainingJobName"] for s in payload["TrainingJobSummaries"]] == ["dated"]


def test_jobs_belong_to_the_region_the_request_was_signed_for(start_emulator):
    import boto3
    from botocore.config import Config

    from tests.helpers import CREDENTIALS

    server = start_emulator("ample")

    def client(region: str):
        config = Config(retries={"max_attempts": 1, "mode": "standard"})
        credentials = {**CREDENTIALS, "region_name": region}
        return boto3.client("sagemaker", endpoint_url=server.endpoint_url, config=config, **credentials)

    europe, virginia = client("eu-west-1"), client("us-east-1")
    arn = europe.create_training_job(**training_request("regional", GPU_PAIR))["TrainingJobArn"]
    assert arn.startswith("arn:aws:sagemaker:eu-west-1:")
    assert [s["TrainingJobName"] for s in europe.list_training_jobs()["TrainingJobSummaries"]] == ["regional"]
    assert virginia.list_training_jobs()["TrainingJobSummaries"] == []
    with pytest.raises(ClientError):
        virginia.describe_training_job(TrainingJobName="regional")
    # Names are unique per account and Region: the same name is free in another Region.
    assert virginia.create_training_job(**training_request("regional", GPU_PAIR))["TrainingJobArn"].startswith(
        "arn:aws:sagemaker:us-east-1:"
    )
    regions = sorted(job["region"] for job in control(server.endpoint_url, "jobs")["jobs"])
    assert regions == ["eu-west-1", "us-east-1"]


def test_the_docs_time_filter_example_works_on_a_fast_clock(start_emulator):
    """The emulator page's example, run as written (only the endpoint changed) against a bundled 60x scenario."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "emulator.md").read_text()
    example = re.search(r"<!-- readme-example: time-filter -->\n```python\n(.*?)```", page, re.DOTALL)
    assert example, "docs/emulator.md keeps its time-filter example"
    server = start_emulator("gpu-shortage")  # speed 60
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("an-hour-of-virtual-time", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 1800})
    namespace: dict = {}
    exec(example.group(1).replace("http://127.0.0.1:8907", server.endpoint_url), namespace)
    assert [s["TrainingJobName"] for s in namespace["recent"]] == ["an-hour-of-virtual-time"]
    # Why the example reads the emulator's clock: by the client's own, the job was modified in the future.
    import datetime

    own_now = datetime.datetime.now(datetime.UTC)
    assert client.list_training_jobs(LastModifiedTimeAfter=own_now)["TrainingJobSummaries"] != []


def test_list_tags_answers_a_jobs_tags_by_arn_in_its_region(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    request = training_request("tagged", GPU_PAIR)
    request["Tags"] = [{"Key": f"k{i}", "Value": str(i)} for i in range(50)]  # SageMaker's most
    arn = client.create_training_job(**request)["TrainingJobArn"]
    pages = list(client.get_paginator("list_tags").paginate(ResourceArn=arn))
    assert [t["Key"] for p in pages for t in p["Tags"]] == [f"k{i}" for i in range(50)]
    with pytest.raises(ClientError) as unknown:
        client.list_tags(ResourceArn=arn.replace("tagged", "nobody"))
    assert unknown.value.response["Error"]["Code"] == "ValidationException"
    west = boto_client(server.endpoint_url, service="sagemaker", region="eu-west-1")
    with pytest.raises(ClientError):
        west.list_tags(ResourceArn=arn)
