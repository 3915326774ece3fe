"""sagemaker-core (the SageMaker Python SDK's resource layer) against the emulator, unmodified.

Run by ``test_conformance.py`` with the Python of ``.venv-sdk`` (``make sdk-venv``): sagemaker-core's pins
cannot share Airflow's environment. Arguments name the flows to run (default: all). The endpoint comes from
``AWS_ENDPOINT_URL``, which boto3 honours for every service, as a user would point the SDK at a local
endpoint. Prints one JSON object: what each flow saw.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

from sagemaker.core.resources import ProcessingJob, TrainingJob, TrainingPlan
from sagemaker.core.shapes import (
    AlgorithmSpecification,
    AppSpecification,
    InstancePreference,
    OutputDataConfig,
    ProcessingClusterConfig,
    ProcessingInstancePreference,
    ProcessingResources,
    ProcessingStoppingCondition,
    ResourceConfig,
    StoppingCondition,
    TrainingPlanFilter,
)

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/eval:1"
REGION = "us-east-1"


def create_training(name: str, preferences: list[InstancePreference] | None = None) -> TrainingJob:
    return TrainingJob.create(
        training_job_name=name,
        role_arn=ROLE,
        algorithm_specification=AlgorithmSpecification(training_image=IMAGE, training_input_mode="File"),
        output_data_config=OutputDataConfig(s3_output_path="s3://bucket/output"),
        resource_config=ResourceConfig(
            volume_size_in_gb=100,
            instance_preferences=preferences
            or [
                InstancePreference(instance_type="ml.p5.48xlarge", instance_count=1),
                InstancePreference(instance_type="ml.p4d.24xlarge", instance_count=2),
            ],
        ),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=3600),
        region=REGION,
    )


def training_runs() -> dict[str, Any]:
    job = create_training("sdk-training")
    job.wait(poll=1, timeout=300)
    job = TrainingJob.get("sdk-training", region=REGION)
    return {
        "status": job.training_job_status,
        "selected": [job.resource_config.selected_instance_type, job.resource_config.selected_instance_count],
        "model": job.model_artifacts.s3_model_artifacts,
    }


def training_waits_with_logs() -> dict[str, Any]:
    job = create_training("sdk-logs")
    job.wait(poll=1, timeout=300, logs=True)
    return {"status": TrainingJob.get("sdk-logs", region=REGION).training_job_status}


def processing_runs() -> dict[str, Any]:
    job = ProcessingJob.create(
        processing_job_name="sdk-processing",
        role_arn=ROLE,
        app_specification=AppSpecification(image_uri=IMAGE),
        processing_resources=ProcessingResources(
            cluster_config=ProcessingClusterConfig(
                volume_size_in_gb=30,
                instance_preferences=[
                    ProcessingInstancePreference(instance_type="ml.m5.xlarge", instance_count=1),
                    ProcessingInstancePreference(instance_type="ml.c5.xlarge", instance_count=2),
                ],
            )
        ),
        stopping_condition=ProcessingStoppingCondition(max_runtime_in_seconds=3600),
        region=REGION,
    )
    job.wait(poll=1, timeout=300)
    job = ProcessingJob.get("sdk-processing", region=REGION)
    config = job.processing_resources.cluster_config
    return {
        "status": job.processing_job_status,
        "selected": [config.selected_instance_type, config.selected_instance_count],
    }


def listing_and_stopping() -> dict[str, Any]:
    job = create_training("sdk-stopped")
    job.stop()
    job.wait(poll=1, timeout=300)
    names = sorted(j.training_job_name for j in TrainingJob.get_all(name_contains="sdk-", region=REGION))
    return {"status": TrainingJob.get("sdk-stopped", region=REGION).training_job_status, "listed": names}


def training_plan_bought_and_used() -> dict[str, Any]:
    """A plan found, bought, waited on until Active, listed, and a job's plan-backed entry placed on it.
    sagemaker-core wraps no search of offerings, so the search goes through its own client, as its users do."""
    client = TrainingPlan.get_sagemaker_client(region_name=REGION)
    offerings = client.search_training_plan_offerings(
        InstanceType="ml.p5.48xlarge", InstanceCount=1, DurationHours=24, TargetResources=["training-job"]
    )["TrainingPlanOfferings"]
    plan = TrainingPlan.create(
        training_plan_name="sdk-plan", training_plan_offering_id=offerings[0]["TrainingPlanOfferingId"], region=REGION
    )
    plan.wait_for_status("Active", poll=1, timeout=300)
    active = [
        p.training_plan_name
        for p in TrainingPlan.get_all(filters=[TrainingPlanFilter(name="Status", value="Active")], region=REGION)
    ]
    job = create_training(
        "sdk-on-plan",
        [
            InstancePreference(
                instance_type="ml.p5.48xlarge", instance_count=1, training_plan_arns=[plan.training_plan_arn]
            ),
            InstancePreference(instance_type="ml.p4d.24xlarge", instance_count=1),
        ],
    )
    job.refresh()
    busy = TrainingPlan.get("sdk-plan", region=REGION)
    job.wait(poll=1, timeout=300)
    done = TrainingPlan.get("sdk-plan", region=REGION)
    return {
        "status": plan.status,
        "listed_active": active,
        "selected": [job.resource_config.selected_instance_type, job.resource_config.selected_instance_count],
        "job_status": TrainingJob.get("sdk-on-plan", region=REGION).training_job_status,
        "in_use_while_running": busy.in_use_instance_count,
        "available_after": done.available_instance_count,
        "total": done.total_instance_count,
    }


def main() -> None:
    flows: dict[str, Callable[[], dict[str, Any]]] = {
        "training": training_runs,
        "processing": processing_runs,
        "stop_and_list": listing_and_stopping,
        "wait_with_logs": training_waits_with_logs,
        "training_plan": training_plan_bought_and_used,
    }
    results: dict[str, Any] = {}
    for name in sys.argv[1:] or list(flows):
        flow = flows[name]
        try:
            results[name] = {"ok": True, **flow()}
        except Exception as error:  # each flow's outcome is reported, the next still runs
            results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()}
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
