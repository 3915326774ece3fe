"""Invalid requests, one or more per locally checkable rule of spec §3, with the text the error must hold.

Shared by the unit tests (the validator itself) and the fault campaign (the same requests through a real
Airflow, static and templated, with zero jobs created).
"""

from __future__ import annotations

from typing import Any

from tests.helpers import processing_request, training_request

PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-plan"
P5 = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}
G5 = {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2}
M5 = {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}
C5 = {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1}


def training_with(
    *entries: dict[str, Any],
    stopping: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
    **resources: Any,
) -> dict[str, Any]:
    request = training_request("job", [dict(e) for e in entries], **resources)
    request["StoppingCondition"].update(stopping or {})
    request.update(top or {})
    return request


def processing_with(*entries: dict[str, Any], stopping: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    request = processing_request("job", [dict(e) for e in entries], **cluster)
    if stopping is not None:
        request["StoppingCondition"] = stopping
    return request


def _without_volume(request: dict[str, Any]) -> dict[str, Any]:
    request["ProcessingResources"]["ClusterConfig"].pop("VolumeSizeInGB")
    return request


TRAINING_CASES = {
    "R1": (training_with(), "empty"),
    "R2": (
        training_with(*[{"InstanceType": f"ml.g{i}.48xlarge", "InstanceCount": 1} for i in range(4, 10)]),
        "at most 5",
    ),
    "R3": (training_with({"InstanceCount": 1}), "preference #1: InstanceType is required [R3/P3]"),
    "R4a": (training_with(P5, G5, P5), "preference #3 (ml.p5.48xlarge): ml.p5.48xlarge is already preference #1"),
    "R4b": (
        training_with(P5, {"InstanceType": "ml.g5.48xlarge"}),
        "preference #2 (ml.g5.48xlarge): InstanceCount must be set on every preference or on none [R4b]",
    ),
    "R4c": (
        training_with(P5, G5, InstanceCount=2),
        "preference #1 (ml.p5.48xlarge): InstanceCount is set both here and at the job level",
    ),
    "R4d": (training_with({"InstanceType": "ml.p5.48xlarge"}), "no InstanceCount given"),
    "R5": (training_with({"InstanceType": "ml.p5.48xlarge", "InstanceCount": -1}), "at least 1"),
    "R5-zero": (training_with({"InstanceType": "ml.p5.48xlarge", "InstanceCount": 0}), "at least 1"),
    "R5-type": (training_with({"InstanceType": "ml.p5.48xlarge", "InstanceCount": True}), "must be an integer"),
    "R6": (
        training_with(P5, InstanceType="ml.g5.48xlarge"),
        "ResourceConfig.InstanceType cannot be combined with InstancePreferences [R6]",
    ),
    "R7": (training_with(P5, InstanceGroups=[{"InstanceType": "ml.g5.48xlarge"}]), "[R7]"),
    "R8": (training_with(P5, InstancePlacementConfig={"EnableMultipleJobs": False}), "[R8]"),
    "R9": (training_with(P5, top={"EnableManagedSpotTraining": True}), "EnableManagedSpotTraining"),
    "R11": (training_with({**P5, "TrainingPlanArns": [PLAN, PLAN]}), "exactly one training plan ARN [R11]"),
    "R11-empty": (training_with({**P5, "TrainingPlanArns": []}), "[R11]"),
    "R13": (training_with({**P5, "TrainingPlanArns": [PLAN]}, G5, TrainingPlanArn=PLAN), "[R13]"),
    "R15": (training_with({**P5, "TrainingPlanArns": ["arn:short"]}), "50 to 2048 characters"),
    "R16": (training_with({**P5, "TrainingPlanArns": ["x" * 60]}), "not a SageMaker training-plan ARN [R16]"),
    "R19": (training_with({"InstanceType": "g5.48xlarge", "InstanceCount": 1}), "is not an instance type"),
    "R20": (training_with(P5, SelectedInstanceType="ml.p5.48xlarge"), "[R20]"),
    "R21": (training_with(P5, stopping={"MaxPendingTimeInSeconds": 1799}), "1800 to 2419200"),
    "R22": (training_with(P5, stopping={"MaxPendingTimeInSeconds": 2419201}), "1800 to 2419200"),
    "R23": (training_with(P5, stopping={"MaxPendingTimeInSeconds": "soon"}), "an integer, got 'soon'"),
    "R24": (training_with(P5, stopping={"MaxWaitTimeInSeconds": 3600}), "[R24]"),
    "missing-list": (
        training_request("job", None, InstanceType="ml.p5.48xlarge", InstanceCount=1),
        "InstancePreferences is required",
    ),
    "job-name": (training_with(P5, top={"TrainingJobName": "bad_name!"}), "TrainingJobName"),
}

PROCESSING_CASES = {
    "P1": (processing_with(), "empty"),
    "P2": (
        processing_with(*[{"InstanceType": f"ml.m{i}.xlarge", "InstanceCount": 1} for i in range(3, 9)]),
        "at most 5",
    ),
    "P3": (processing_with({"InstanceCount": 1}), "InstanceType is required"),
    "P4": (processing_with(M5, C5, M5), "preference #3 (ml.m5.xlarge): ml.m5.xlarge is already preference #1"),
    "P5": (processing_with(M5, {"InstanceType": "ml.c5.xlarge"}), "every preference or on none [P5b]"),
    "P6": (processing_with({"InstanceType": "ml.m5.xlarge", "InstanceCount": 0}), "at least 1"),
    "P7": (processing_with({"InstanceType": "ml.m5.xlarge", "InstanceCount": 101}), "at most 100"),
    "P8": (processing_with(M5, InstanceType="ml.c5.xlarge"), "[P8]"),
    "P9": (processing_with({**M5, "TrainingPlanArns": [PLAN]}), "[P9]"),
    "P10": (processing_with(M5, stopping={"MaxRuntimeInSeconds": 60, "MaxPendingTimeInSeconds": 3600}), "[P10]"),
    "P11": (_without_volume(processing_with(M5)), "VolumeSizeInGB"),
    "P14": (processing_with(M5, stopping={}), "[P14]"),
}
