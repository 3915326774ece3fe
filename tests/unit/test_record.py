from __future__ import annotations

import datetime as dt
import json

import pendulum
import pytest

from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView, jsonable
from airflow_sm_prefs.wait import announcement

T0 = dt.datetime(2026, 11, 30, 2, 0, tzinfo=dt.UTC)


def _at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def training_description(**overrides):
    description = {
        "TrainingJobName": "eval",
        "TrainingJobArn": "arn:aws:sagemaker:us-east-1:1:training-job/eval",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "ResourceConfig": {
            "VolumeSizeInGB": 100,
            "InstancePreferences": [
                {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
                {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
            ],
            "SelectedInstanceType": "ml.p4d.24xlarge",
            "SelectedInstanceCount": 2,
        },
        "CreationTime": T0,
        "TrainingStartTime": _at(700),
        "TrainingEndTime": _at(1300),
        "LastModifiedTime": _at(1300),
        "BillableTimeInSeconds": 600,
        "SecondaryStatusTransitions": [
            {"Status": "Pending", "StartTime": T0, "EndTime": _at(640)},
            {"Status": "Starting", "StartTime": _at(640), "EndTime": _at(700)},
            {"Status": "Training", "StartTime": _at(700), "EndTime": _at(1300)},
            {"Status": "Completed", "StartTime": _at(1300), "EndTime": _at(1300)},
        ],
    }
    description.update(overrides)
    return description


def test_record_of_a_fallback_training_job():
    built = record.build(JobFacts.of(JobView.parse(TRAINING, training_description()), "us-east-1"))
    assert built == {
        "job_name": "eval",
        "job_arn": "arn:aws:sagemaker:us-east-1:1:training-job/eval",
        "job_kind": "training",
        "status": "Completed",
        "secondary_status": "Completed",
        "selected_instance_type": "ml.p4d.24xlarge",
        "selected_instance_count": 2,
        "selected_rank": 1,
        "fell_back": True,
        "preferences": [
            {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        ],
        "training_plan_arn": None,
        "training_plan": None,
        "dropped_preferences": [],
        "uncertified_preferences": [],
        "certified_run_seconds": None,
        "run_time_vs_certified": None,
        "pending_seconds": 640.0,
        "run_seconds": 600.0,
        "billable_seconds": 600,
        "billable_instance_seconds": 1200,
        "estimated_cost_usd": None,  # the shipped price table has no prices
        "cost_basis": "unknown-price",
        "failure_reason": None,
        "failure_cause": None,
        "failure_cause_rule": None,
        "utilization": None,
        "region": "us-east-1",
        "created_at": "2026-11-30T02:00:00+00:00",
        "started_at": "2026-11-30T02:11:40+00:00",
        "ended_at": "2026-11-30T02:21:40+00:00",
        "last_modified_at": "2026-11-30T02:21:40+00:00",
    }
    json.dumps(built)  # the XCom contract is plain JSON


@pytest.mark.parametrize(
    ("reason", "cause", "rule"),
    [
        (
            "ClientError: Artifact upload failed: the bucket 'bucket' does not exist",
            "configuration",
            "SageMaker's ClientError (the request, its data or permissions)",
        ),
        ("AlgorithmError: CUDA error: no kernel image is available", "hardware", "the GPU architecture or driver"),
        ("AlgorithmError: ValueError: bad hyperparameter", "code", "the container's own failure"),
        (None, "unknown", "no failure reason given"),
    ],
)
def test_record_of_a_job_that_failed_after_starting_says_why(reason, cause, rule):
    description = training_description(TrainingJobStatus="Failed", SecondaryStatus="Failed", FailureReason=reason)
    if reason is None:
        del description["FailureReason"]
    built = record.build(JobFacts.of(JobView.parse(TRAINING, description), "us-east-1"))
    assert (built["failure_cause"], built["failure_cause_rule"]) == (cause, rule)


def test_record_from_an_event_payload_equals_record_from_boto3():
    description = training_description()
    assert record.build(JobFacts.of(JobView.parse(TRAINING, jsonable(description)), "r")) == record.build(
        JobFacts.of(JobView.parse(TRAINING, description), "r")
    )


def test_record_of_a_job_that_never_got_capacity():
    description = training_description(
        TrainingJobStatus="Stopped",
        SecondaryStatus="Stopped",
        TrainingStartTime=None,
        TrainingEndTime=None,
        BillableTimeInSeconds=None,
        LastModifiedTime=_at(1800),
        FailureReason="CapacityError: none",
        SecondaryStatusTransitions=[
            {"Status": "Pending", "StartTime": T0, "EndTime": _at(1800)},
            {"Status": "Stopped", "StartTime": _at(1800), "EndTime": _at(1800)},
        ],
    )
    description["ResourceConfig"] = {
        k: v for k, v in description["ResourceConfig"].items() if not k.startswith("Selected")
    }
    built = record.build(JobFacts.of(JobView.parse(TRAINING, description), "us-east-1"))
    assert (built["selected_instance_type"], built["selected_rank"], built["fell_back"]) == (None, None, None)
    assert built["pending_seconds"] == 1800.0
    assert built["run_seconds"] is None and built["billable_instance_seconds"] is None
    assert (built["failure_cause"], built["failure_cause_rule"]) == (
        "capacity",
        "the job got no capacity in the time allowed",
    )
    assert JobView.parse(TRAINING, description).describe_preferences() == "#1 ml.p5.48xlarge x1, #2 ml.p4d.24xlarge x2"


def test_pending_time_of_a_job_still_waiting_counts_up_to_now():
    description = training_description(
        TrainingJobStatus="InProgress",
        SecondaryStatus="Pending",
        SecondaryStatusTransitions=[{"Status": "Pending", "StartTime": T0}],
    )
    now = pendulum.instance(_at(90))
    assert JobView.parse(TRAINING, description).pending_seconds(now) == 90.0


def test_processing_selection_and_uniform_count():
    description = {
        "ProcessingJobName": "prep",
        "ProcessingJobArn": "arn",
        "ProcessingJobStatus": "InProgress",
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": 3,
                "VolumeSizeInGB": 30,
                "InstancePreferences": [{"InstanceType": "ml.g6.12xlarge"}, {"InstanceType": "ml.g5.12xlarge"}],
                "SelectedInstanceType": "ml.g6.12xlarge",
                "SelectedInstanceCount": 3,
            }
        },
        "CreationTime": T0,
        "ProcessingStartTime": _at(65),
    }
    chosen = announcement.selection(JobView.parse(PROCESSING, description), "eu-west-1")
    assert chosen == {
        "job_name": "prep",
        "job_kind": "processing",
        "selected_instance_type": "ml.g6.12xlarge",
        "selected_instance_count": 3,
        "selected_rank": 0,
        "fell_back": False,
        "pending_seconds": 65.0,
        "region": "eu-west-1",
    }
    assert JobView.parse(PROCESSING, description).describe_preferences() == "#1 ml.g6.12xlarge x3, #2 ml.g5.12xlarge x3"


def test_the_selection_keeps_a_milliseconds_wait_and_a_missing_count_as_zero():
    description = training_description(TrainingJobStatus="InProgress", SecondaryStatus="Starting")
    description["SecondaryStatusTransitions"][0]["EndTime"] = _at(640.1234)
    del description["ResourceConfig"]["SelectedInstanceCount"]
    chosen = announcement.selection(JobView.parse(TRAINING, description), "us-east-1")
    assert chosen is not None
    assert (chosen["pending_seconds"], chosen["selected_instance_count"]) == (640.123, 0)


def test_the_record_names_the_plan_it_ran_on_and_rounds_the_benchmark_ratio_to_three_digits():
    description = training_description()
    description["ResourceConfig"]["InstancePreferences"][1]["TrainingPlanArns"] = ["arn:aws:sagemaker:plan/p4d"]
    facts = JobFacts.of(JobView.parse(TRAINING, description), "us-east-1", certified_run_seconds=700.0)
    built = record.build(facts)
    assert built["training_plan_arn"] == "arn:aws:sagemaker:plan/p4d"
    assert built["run_time_vs_certified"] == 0.857  # 600 s against 700 s
    decided = record.PreflightDecided(
        dropped_preferences=[{"rank": 2, "entry": {"InstanceType": "ml.g5.48xlarge"}, "reason": "too dear"}],
        uncertified_preferences=["preference #2: not certified"],
        training_plan={"plan_arn": None, "notes": ["none matching"]},
    )
    with_decisions = record.build(facts, decided)
    assert with_decisions["dropped_preferences"] == decided["dropped_preferences"]
    assert with_decisions["uncertified_preferences"] == ["preference #2: not certified"]
    assert with_decisions["training_plan"] == {"plan_arn": None, "notes": ["none matching"]}
