"""Request builders and clients shared by the test layers."""

from __future__ import annotations

import copy
import json
import urllib.request
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def boto_client(endpoint_url: str, validate: bool = True) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(parameter_validation=validate, retries={"max_attempts": 1, "mode": "standard"})
    return boto3.client("sagemaker", endpoint_url=endpoint_url, config=config, **CREDENTIALS)


def training_request(name: str, preferences: list[dict[str, Any]] | None = None, **resource: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"VolumeSizeInGB": 100}
    if preferences is not None:
        resources["InstancePreferences"] = copy.deepcopy(preferences)
    resources.update(resource)
    return {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/eval:1",
            "TrainingInputMode": "File",
        },
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
        "ResourceConfig": resources,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def processing_request(name: str, preferences: list[dict[str, Any]] | None = None, **cluster: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"VolumeSizeInGB": 30}
    if preferences is not None:
        config["InstancePreferences"] = copy.deepcopy(preferences)
    config.update(cluster)
    return {
        "ProcessingJobName": name,
        "RoleArn": ROLE,
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "ProcessingResources": {"ClusterConfig": config},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def control(endpoint_url: str, route: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{endpoint_url}/_emulator/{route}", data=data, method="GET" if body is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


GPU_PAIR = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]
