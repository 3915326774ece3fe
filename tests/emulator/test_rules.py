"""Every service-side rule of spec §3 (R1–R25, P1–P14), one test each, over HTTP with unmodified boto3.

Rules botocore would catch client-side are sent with parameter validation off, so the emulator's own
check is what is tested.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers import boto_client, processing_request, training_request

pytestmark = pytest.mark.emulator

SCENARIO = str(Path(__file__).with_name("rules-scenario.yaml"))
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-plan"
P5 = {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}
G5 = {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1}
Mutation = Callable[[dict[str, Any]], None]


def _t(*preferences: dict[str, Any], **resource: Any) -> dict[str, Any]:
    return training_request("rule-job", list(preferences), **resource)


def _p(*preferences: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return processing_request("rule-job", list(preferences), **cluster)


def _with(request: dict[str, Any], mutate: Mutation) -> dict[str, Any]:
    mutate(request)
    return request


def _stopping(**values: Any) -> Mutation:
    return lambda r: r["StoppingCondition"].update(values)


TRAINING_RULES: dict[str, tuple[dict[str, Any], str, str]] = {
    "R1": (_t(), "ValidationException", "InstancePreferences"),
    "R2": (
        _t(
            *[
                {"InstanceType": t, "InstanceCount": 1}
                for t in (
                    "ml.p5.48xlarge",
                    "ml.p4d.24xlarge",
                    "ml.g5.48xlarge",
                    "ml.g6.48xlarge",
                    "ml.g5.12xlarge",
                    "ml.g6.12xlarge",
                )
            ]
        ),
        "ValidationException",
        "InstancePreferences",
    ),
    "R3": (_t({"InstanceCount": 1}), "ValidationException", "InstanceType"),
    "R4a": (_t(P5, G5, dict(P5)), "ValidationException", "InstanceType"),
    "R4b": (_t(P5, {"InstanceType": "ml.g5.48xlarge"}), "ValidationException", "InstanceCount"),
    "R4c": (_t(P5, G5, InstanceCount=2), "ValidationException", "InstanceCount"),
    "R4d": (_t({"InstanceType": "ml.p5.48xlarge"}), "ValidationException", "InstanceCount"),
    "R5": (
        _t({"InstanceType": "ml.p5.48xlarge", "InstanceCount": -1}),
        "ValidationException",
        "InstanceCount",
    ),
    "R6": (_t(P5, InstanceType="ml.g5.48xlarge"), "ValidationException", "InstanceType"),
    "R7": (
        _t(
            P5,
            InstanceGroups=[{"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1, "InstanceGroupName": "g"}],
        ),
        "ValidationException",
        "InstanceGroups",
    ),
    "R8": (
        _t(P5, InstancePlacementConfig={"EnableMultipleJobs": False}),
        "ValidationException",
        "InstancePlacementConfig",
    ),
    "R9": (
        _with(_t(P5), lambda r: r.update(EnableManagedSpotTraining=True)),
        "ValidationException",
        "EnableManagedSpotTraining",
    ),
    "R10": (
        _with(
            _t(P5),
            lambda r: (
                r.update(EnableManagedSpotTraining=True),
                r["StoppingCondition"].update(MaxWaitTimeInSeconds=7200),
            ),
        ),
        "ValidationException",
        "EnableManagedSpotTraining",
    ),
    "R11": (_t({**P5, "TrainingPlanArns": [PLAN, PLAN]}), "ValidationException", "TrainingPlanArns"),
    "R12": (_t({**G5, "TrainingPlanArns": [PLAN]}), "ValidationException", "TrainingPlanArns"),
    "R13": (
        _t({**P5, "TrainingPlanArns": [PLAN]}, G5, TrainingPlanArn=PLAN),
        "ValidationException",
        "TrainingPlanArn",
    ),
    "R14": (_t(G5, TrainingPlanArn=PLAN), "ValidationException", "TrainingPlanArn"),
    "R15": (_t({**P5, "TrainingPlanArns": ["arn:short"]}), "ValidationException", "TrainingPlanArns"),
    "R16": (_t({**P5, "TrainingPlanArns": ["x" * 60]}), "ValidationException", "TrainingPlanArns"),
    "R17": (
        _t(P5, {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}),
        "ResourceLimitExceeded",
        "ml.p4d.24xlarge",
    ),
    "R18": (
        _with(
            _t({"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}, G5),
            lambda r: r["AlgorithmSpecification"].update(TrainingImage="builtin-xgboost:1"),
        ),
        "ValidationException",
        "ml.g5.48xlarge",
    ),
    "R19": (
        _t({"InstanceType": "ml.bogus.2xlarge", "InstanceCount": 1}),
        "ValidationException",
        "InstanceType",
    ),
    "R20": (_t(P5, SelectedInstanceType="ml.p5.48xlarge"), "ValidationException", "SelectedInstanceType"),
    "R21": (
        _with(_t(P5), _stopping(MaxPendingTimeInSeconds=1799)),
        "ValidationException",
        "MaxPendingTimeInSeconds",
    ),
    "R22": (
        _with(_t(P5), _stopping(MaxPendingTimeInSeconds=2419201)),
        "ValidationException",
        "MaxPendingTimeInSeconds",
    ),
    "R23": (
        _with(_t(P5), _stopping(MaxPendingTimeInSeconds="3600")),
        "SerializationException",  # a string where the model has an integer: the JSON protocol refuses it
        "MaxPendingTimeInSeconds",
    ),
    "R24": (
        _with(_t(P5), _stopping(MaxWaitTimeInSeconds=7200)),
        "ValidationException",
        "MaxWaitTimeInSeconds",
    ),
}

M5 = {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}
G5P = {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1}
PROCESSING_RULES: dict[str, tuple[dict[str, Any], str, str]] = {
    "P1": (_p(), "ValidationException", "InstancePreferences"),
    "P2": (
        _p(
            *[
                {"InstanceType": t, "InstanceCount": 1}
                for t in (
                    "ml.m5.xlarge",
                    "ml.m5.4xlarge",
                    "ml.c5.xlarge",
                    "ml.g5.48xlarge",
                    "ml.g6.48xlarge",
                    "ml.g5.12xlarge",
                )
            ]
        ),
        "ValidationException",
        "InstancePreferences",
    ),
    "P3": (_p({"InstanceCount": 1}), "ValidationException", "InstanceType"),
    "P4": (_p(M5, dict(M5)), "ValidationException", "InstanceType"),
    "P5": (_p(M5, {"InstanceType": "ml.c5.xlarge"}), "ValidationException", "InstanceCount"),
    "P6": (_p({"InstanceType": "ml.m5.xlarge", "InstanceCount": 0}), "ValidationException", "InstanceCount"),
    "P7": (
        _p({"InstanceType": "ml.m5.xlarge", "InstanceCount": 101}),
        "ValidationException",
        "InstanceCount",
    ),
    "P8": (_p(M5, InstanceType="ml.c5.xlarge"), "ValidationException", "InstanceType"),
    "P9": (_p({**M5, "TrainingPlanArns": [PLAN]}), "ValidationException", "TrainingPlanArns"),
    "P10": (
        _with(_p(M5), _stopping(MaxPendingTimeInSeconds=3600)),
        "ValidationException",
        "MaxPendingTimeInSeconds",
    ),
    "P11": (
        _with(_p(M5), lambda r: r["ProcessingResources"]["ClusterConfig"].pop("VolumeSizeInGB")),
        "ValidationException",
        "VolumeSizeInGB",
    ),
    "P12": (
        _p(M5, {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2}),
        "ResourceLimitExceeded",
        "ml.g5.12xlarge",
    ),
    "P13": (
        _with(_p(M5, G5P), lambda r: r["AppSpecification"].update(ImageUri="builtin-xgboost:1")),
        "ValidationException",
        "ml.g5.48xlarge",
    ),
    "P14": (
        _with(_p(M5), lambda r: r.update(StoppingCondition={})),
        "ValidationException",
        "MaxRuntimeInSeconds",
    ),
}


@pytest.fixture
def emulator(start_emulator):
    return start_emulator(SCENARIO)


# botocore cannot even serialize members its model lacks, so these go over the wire as raw JSON 1.1.
UNSERIALIZABLE = {"P9", "P10"}


def _raw_post(server, operation: str, request: dict[str, Any]) -> tuple[str, str]:
    body = json.dumps(request).encode()
    headers = {"X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"}
    http_request = urllib.request.Request(server.endpoint_url + "/", data=body, headers=headers, method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(http_request, timeout=10)
    payload = json.loads(error.value.read())
    return payload["__type"], payload["message"]


def _rejected(server, rule: str, create: str, request: dict[str, Any], code: str, named: str) -> None:
    if rule in UNSERIALIZABLE:
        operation = "".join(part.capitalize() for part in create.split("_"))
        got_code, message = _raw_post(server, operation, request)
    else:
        client = boto_client(server.endpoint_url, validate=False)
        with pytest.raises(ClientError) as error:
            getattr(client, create)(**request)
        got_code, message = error.value.response["Error"]["Code"], error.value.response["Error"]["Message"]
    assert got_code == code
    assert named in message
    assert server.engine.jobs == {}, "a rejected request must not create a job"


@pytest.mark.parametrize("rule", sorted(TRAINING_RULES))
def test_training_rule_is_rejected(emulator, rule):
    request, code, named = TRAINING_RULES[rule]
    _rejected(emulator, rule, "create_training_job", request, code, named)


@pytest.mark.parametrize("rule", sorted(PROCESSING_RULES))
def test_processing_rule_is_rejected(emulator, rule):
    request, code, named = PROCESSING_RULES[rule]
    _rejected(emulator, rule, "create_processing_job", request, code, named)


def test_R25_duplicate_name_is_resource_in_use(emulator):
    client = boto_client(emulator.endpoint_url)
    client.create_training_job(**_t(P5))
    with pytest.raises(ClientError) as error:
        client.create_training_job(**_t(G5))
    assert error.value.response["Error"]["Code"] == "ResourceInUse"
    assert len(emulator.engine.jobs) == 1


def test_cpu_only_list_with_max_pending_is_accepted(emulator):
    """MaxPendingTimeInSeconds 'has no effect' on CPU-only lists; nothing says the service rejects it."""
    client = boto_client(emulator.endpoint_url)
    request = _with(_t(M5), _stopping(MaxPendingTimeInSeconds=3600))
    client.create_training_job(**request)
    assert client.describe_training_job(TrainingJobName="rule-job")["TrainingJobStatus"] == "InProgress"


def test_valid_requests_are_accepted(emulator):
    client = boto_client(emulator.endpoint_url)
    client.create_training_job(**_t({**P5, "TrainingPlanArns": [PLAN]}, G5))
    client.create_processing_job(**_p(M5, {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1}))
    assert len(emulator.engine.jobs) == 2
