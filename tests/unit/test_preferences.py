"""Every locally checkable rule of spec §3, for training and processing: a clear error naming rule and entry."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_sm_prefs.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.preferences import (
    InstancePreference,
    PreferenceValidationError,
    cast_integers,
    is_templated,
    to_api_entries,
    validate_processing_request,
    validate_training_request,
)
from tests.helpers import processing_request, training_request

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-plan"
P5 = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}
G5 = {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2}
M5 = {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}
C5 = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1}


def _t(
    *entries: dict[str, Any],
    stopping: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
    **resources: Any,
) -> dict[str, Any]:
    request = training_request("job", [dict(e) for e in entries], **resources)
    request["StoppingCondition"].update(stopping or {})
    request.update(top or {})
    return request


def _p(*entries: dict[str, Any], stopping: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    request = processing_request("job", [dict(e) for e in entries], **cluster)
    if stopping is not None:
        request["StoppingCondition"] = stopping
    return request


TRAINING_CASES = {
    "R1": (_t(), "empty"),
    "R2": (_t(*[{"InstanceType": f"ml.g{i}.48xlarge", "InstanceCount": 1} for i in range(4, 10)]), "at most 5"),
    "R3": (_t({"InstanceCount": 1}), "preference #1: InstanceType is required [R3/P3]"),
    "R4a": (_t(P5, G5, P5), "preference #3 (ml.p5.48xlarge): ml.p5.48xlarge is already preference #1"),
    "R4b": (
        _t(P5, {"InstanceType": "ml.g5.48xlarge"}),
        "preference #2 (ml.g5.48xlarge): InstanceCount must be set on every preference or on none [R4b]",
    ),
    "R4c": (
        _t(P5, G5, InstanceCount=2),
        "preference #1 (ml.p5.48xlarge): InstanceCount is set both here and at the job level",
    ),
    "R4d": (_t({"InstanceType": "ml.p5.48xlarge"}), "no InstanceCount given"),
    "R5": (_t({"InstanceType": "ml.p5.48xlarge", "InstanceCount": -1}), "at least 1"),
    "R5-zero": (_t({"InstanceType": "ml.p5.48xlarge", "InstanceCount": 0}), "at least 1"),
    "R5-type": (_t({"InstanceType": "ml.p5.48xlarge", "InstanceCount": True}), "must be an integer"),
    "R6": (
        _t(P5, InstanceType="ml.g5.48xlarge"),
        "ResourceConfig.InstanceType cannot be combined with InstancePreferences [R6]",
    ),
    "R7": (_t(P5, InstanceGroups=[{"InstanceType": "ml.g5.48xlarge"}]), "[R7]"),
    "R8": (_t(P5, InstancePlacementConfig={"EnableMultipleJobs": False}), "[R8]"),
    "R9": (_t(P5, top={"EnableManagedSpotTraining": True}), "EnableManagedSpotTraining"),
    "R11": (_t({**P5, "TrainingPlanArns": [PLAN, PLAN]}), "exactly one training plan ARN [R11]"),
    "R11-empty": (_t({**P5, "TrainingPlanArns": []}), "[R11]"),
    "R13": (_t({**P5, "TrainingPlanArns": [PLAN]}, G5, TrainingPlanArn=PLAN), "[R13]"),
    "R15": (_t({**P5, "TrainingPlanArns": ["arn:short"]}), "50 to 2048 characters"),
    "R16": (_t({**P5, "TrainingPlanArns": ["x" * 60]}), "not a SageMaker training-plan ARN [R16]"),
    "R19": (_t({"InstanceType": "g5.48xlarge", "InstanceCount": 1}), "is not an instance type"),
    "R20": (_t(P5, SelectedInstanceType="ml.p5.48xlarge"), "[R20]"),
    "R21": (_t(P5, stopping={"MaxPendingTimeInSeconds": 1799}), "1800 to 2419200"),
    "R22": (_t(P5, stopping={"MaxPendingTimeInSeconds": 2419201}), "1800 to 2419200"),
    "R23": (_t(P5, stopping={"MaxPendingTimeInSeconds": "soon"}), "must be an integer"),
    "R24": (_t(P5, stopping={"MaxWaitTimeInSeconds": 3600}), "[R24]"),
    "missing-list": (
        training_request("job", None, InstanceType="ml.p5.48xlarge", InstanceCount=1),
        "InstancePreferences is required",
    ),
    "job-name": (_t(P5, top={"TrainingJobName": "bad_name!"}), "TrainingJobName"),
}

PROCESSING_CASES = {
    "P1": (_p(), "empty"),
    "P2": (_p(*[{"InstanceType": f"ml.m{i}.xlarge", "InstanceCount": 1} for i in range(3, 9)]), "at most 5"),
    "P3": (_p({"InstanceCount": 1}), "InstanceType is required"),
    "P4": (_p(M5, C5, M5), "preference #3 (ml.m5.xlarge): ml.m5.xlarge is already preference #1"),
    "P5": (_p(M5, {"InstanceType": "ml.c5.xlarge"}), "every preference or on none [P5b]"),
    "P6": (_p({"InstanceType": "ml.m5.xlarge", "InstanceCount": 0}), "at least 1"),
    "P7": (_p({"InstanceType": "ml.m5.xlarge", "InstanceCount": 101}), "at most 100"),
    "P8": (_p(M5, InstanceType="ml.c5.xlarge"), "[P8]"),
    "P9": (_p({**M5, "TrainingPlanArns": [PLAN]}), "[P9]"),
    "P10": (_p(M5, stopping={"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 3600}), "[P10]"),
    "P11": (_p(M5, VolumeSizeInGB=None), "VolumeSizeInGB"),
    "P14": (_p(M5, stopping={}), "[P14]"),
}


@pytest.mark.parametrize("case", sorted(TRAINING_CASES))
def test_training_rule(case):
    request, expected = TRAINING_CASES[case]
    with pytest.raises(PreferenceValidationError) as error:
        validate_training_request(request)
    assert expected in str(error.value)


@pytest.mark.parametrize("case", sorted(PROCESSING_CASES))
def test_processing_rule(case):
    request, expected = PROCESSING_CASES[case]
    if case == "P11":
        request = copy.deepcopy(request)
        request["ProcessingResources"]["ClusterConfig"].pop("VolumeSizeInGB")
    with pytest.raises(PreferenceValidationError) as error:
        validate_processing_request(request)
    assert expected in str(error.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(PreferenceValidationError) as error:
        validate_training_request(_t(P5, P5, stopping={"MaxWaitTimeInSeconds": 10}, InstanceType="ml.g5.48xlarge"))
    assert len(error.value.problems) == 3


def test_valid_requests_pass_and_cpu_only_pending_limit_warns():
    assert validate_training_request(_t(P5, G5, stopping={"MaxPendingTimeInSeconds": 3600})) == []
    assert validate_training_request(_t({**P5, "TrainingPlanArns": [PLAN]}, G5)) == []
    assert validate_processing_request(_p(M5, C5)) == []
    warnings = validate_training_request(_t(M5, C5, stopping={"MaxPendingTimeInSeconds": 3600}))
    assert "has no effect" in warnings[0]


def test_templated_values_are_left_for_after_rendering():
    request = _t({"InstanceType": "{{ params.gpu }}", "InstanceCount": "{{ params.count }}"}, G5)
    assert validate_training_request(request) == []
    assert is_templated(request)


def test_friendly_forms_become_api_entries():
    entries = to_api_entries(
        [
            InstancePreference("ml.p5.48xlarge", 1, PLAN),
            {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
            ("ml.g5.48xlarge", 4),
            "ml.g6.48xlarge",
        ]
    )
    assert entries == [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "TrainingPlanArns": [PLAN]},
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
        {"InstanceType": "ml.g6.48xlarge"},
    ]
    with pytest.raises(PreferenceValidationError, match="preference #1"):
        to_api_entries([3.5])


def test_rendered_integer_strings_are_cast_including_per_preference_counts():
    request = _t(
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": "2"},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": " 4 "},
        stopping={"MaxPendingTimeInSeconds": "3600"},
        VolumeSizeInGB="100",
    )
    cast = cast_integers(request, TRAINING.integer_paths)
    resources = cast["ResourceConfig"]
    assert [e["InstanceCount"] for e in resources["InstancePreferences"]] == [2, 4]
    assert resources["VolumeSizeInGB"] == 100
    assert cast["StoppingCondition"]["MaxPendingTimeInSeconds"] == 3600
    assert request["ResourceConfig"]["VolumeSizeInGB"] == "100", "the input must not be mutated"
    processing = cast_integers(_p({"InstanceType": "ml.m5.xlarge", "InstanceCount": "3"}), PROCESSING.integer_paths)
    assert processing["ProcessingResources"]["ClusterConfig"]["InstancePreferences"][0]["InstanceCount"] == 3


def test_non_numeric_rendered_count_is_a_clear_error():
    with pytest.raises(PreferenceValidationError, match=r"InstancePreferences\[1\].InstanceCount: expected an integer"):
        cast_integers(_t(P5, {"InstanceType": "ml.g5.48xlarge", "InstanceCount": "two"}), TRAINING.integer_paths)


def test_prepare_merges_friendly_preferences_and_max_pending():
    config = training_request("job", None)
    request = TRAINING.prepare(config, [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 2)], 7200)
    assert request["ResourceConfig"]["InstancePreferences"][1] == {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2}
    assert request["StoppingCondition"]["MaxPendingTimeInSeconds"] == 7200
    assert "InstancePreferences" not in config["ResourceConfig"]
    processing = PROCESSING.prepare(processing_request("job", None), ["ml.m5.xlarge"], 600)
    assert "MaxPendingTimeInSeconds" not in processing["StoppingCondition"], "processing patience is caller-side"
    with pytest.raises(PreferenceValidationError, match="keep one"):
        TRAINING.prepare(_t(P5), [("ml.g5.48xlarge", 1)])
