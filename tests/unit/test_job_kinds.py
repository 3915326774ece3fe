"""What differs between training and processing, held by ``JobKind``: where the resources live in a request and
a response, what of a response travels in a trigger's event, and how the friendly arguments merge in."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING, values_at
from airflow_sm_prefs.request.preferences import RequestValidationError


def test_the_resources_are_found_at_each_kinds_own_depth_and_nowhere_else():
    cluster = {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2}
    assert PROCESSING.resources({"ProcessingResources": {"ClusterConfig": cluster}}) == cluster
    assert PROCESSING.resources({"ProcessingResources": ["ClusterConfig"]}) == {}
    assert PROCESSING.resources({"ProcessingResources": {"ClusterConfig": "ml.m5.xlarge"}}) == {}
    assert TRAINING.resources({"ResourceConfig": cluster}) == cluster and TRAINING.resources({}) == {}


def test_resources_are_made_where_missing_and_a_non_mapping_on_the_way_is_named():
    request: dict = {}
    made = PROCESSING.ensure_resources(request)
    made["InstanceCount"] = 1
    assert request == {"ProcessingResources": {"ClusterConfig": {"InstanceCount": 1}}}
    with pytest.raises(RequestValidationError) as outer:
        PROCESSING.ensure_resources({"ProcessingResources": ["x"]})
    assert outer.value.problems == ["ProcessingResources must be a mapping, got list"]
    with pytest.raises(RequestValidationError) as inner:
        PROCESSING.ensure_resources({"ProcessingResources": {"ClusterConfig": "ml.m5.xlarge"}})
    assert inner.value.problems == ["ProcessingResources.ClusterConfig must be a mapping, got str"]


def test_an_events_description_keeps_the_fields_a_resumed_task_reads_and_only_those():
    description = {
        "ProcessingJobName": "p",
        "ProcessingJobStatus": "Completed",
        "Environment": {"TOKEN": "secret"},
        "AppSpecification": {"ImageUri": "image"},
        "ProcessingResources": {
            "ClusterConfig": {
                "InstancePreferences": [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}],
                "SelectedInstanceType": "ml.m5.xlarge",
                "SelectedInstanceCount": 1,
                "VolumeSizeInGB": 30,
            }
        },
    }
    assert PROCESSING.essentials(description) == {
        "ProcessingJobName": "p",
        "ProcessingJobStatus": "Completed",
        "ProcessingResources": {
            "ClusterConfig": {
                "InstancePreferences": [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}],
                "SelectedInstanceType": "ml.m5.xlarge",
                "SelectedInstanceCount": 1,
            }
        },
    }
    assert TRAINING.essentials({"TrainingJobName": "t", "HyperParameters": {"k": "v"}}) == {
        "TrainingJobName": "t",
        "ResourceConfig": {},
    }


def test_preferences_given_twice_are_refused_and_max_pending_becomes_the_services_limit():
    with pytest.raises(RequestValidationError) as twice:
        TRAINING.prepare({"ResourceConfig": {"InstancePreferences": []}}, [("ml.g5.xlarge", 1)])
    assert twice.value.problems == ["preferences are given both as `preferences=` and in config; keep one"]
    prepared = TRAINING.prepare({}, [("ml.g5.xlarge", 1)], max_pending=3600)
    assert prepared["StoppingCondition"] == {"MaxPendingTimeInSeconds": 3600}
    assert "StoppingCondition" not in PROCESSING.prepare({}, [("ml.m5.xlarge", 1)], max_pending=3600)


def test_values_at_a_path_step_into_lists_and_stop_where_the_shape_differs():
    body = {"Inputs": [{"S3": {"Uri": "s3://a"}}, {"S3": {"Uri": "s3://b"}}, {"Other": 1}]}
    assert values_at(body, ("Inputs", "*", "S3", "Uri")) == ["s3://a", "s3://b"]
    assert values_at({"Inputs": {"S3": {"Uri": "s3://a"}}}, ("Inputs", "*", "S3", "Uri")) == []
    assert values_at({"Inputs": "s3://a"}, ("Inputs", "S3")) == []
    assert values_at(["Inputs"], ("Inputs",)) == []
    assert values_at(body, ()) == [body]
