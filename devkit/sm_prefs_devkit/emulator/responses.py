"""Response shaping: a remembered job as Describe and List answer it, fields named as botocore's model names them."""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any

from sm_prefs_devkit.emulator import job_data, service_model
from sm_prefs_devkit.emulator.model import Job
from sm_prefs_devkit.emulator.scenario import Scenario

if TYPE_CHECKING:
    from sm_prefs_devkit.emulator.kinds import EmulatedKind

FAILURE_REASON_LIMIT = 1024  # the model's maximum length for FailureReason and ExitMessage


def describe(kind: EmulatedKind, job: Job, scenario: Scenario) -> dict[str, Any]:
    members = service_model.operation(kind.operation("Describe")).output_shape.members  # type: ignore[union-attr]
    body = {key: copy.deepcopy(value) for key, value in job.request.items() if key in members}
    body.update(
        {
            kind.name_field: job.name,
            kind.arn_field: job.arn,
            kind.status_field: job.status,
            "CreationTime": job.created,
            "LastModifiedTime": job.last_modified,
        }
    )
    resources = kind.resources(body)
    if job.uses_preferences and not scenario.behaviour.echo_instance_count:
        resources.pop("InstanceCount", None)
    if job.uses_preferences and job.selected is not None:
        resources["SelectedInstanceType"] = job.selected["instance_type"]
        resources["SelectedInstanceCount"] = job.selected["count"]
        if "InstanceCount" not in resources and scenario.behaviour.instance_count_with_per_entry_counts == "selected":
            resources["InstanceCount"] = job.selected["count"]
    if job.start_time is not None:
        body[kind.start_field] = job.start_time
    if job.end_time is not None:
        body[kind.end_field] = job.end_time
    if job.failure_reason:
        body["FailureReason"] = job.failure_reason[:FAILURE_REASON_LIMIT]
    kind.describe_extras(job, body)
    return body


def summarize(kind: EmulatedKind, job: Job) -> dict[str, Any]:
    summary: dict[str, Any] = {
        kind.name_field: job.name,
        kind.arn_field: job.arn,
        "CreationTime": job.created,
        "LastModifiedTime": job.last_modified,
        kind.status_field: job.status,
    }
    if job.end_time is not None:
        summary[kind.end_field] = job.end_time
    kind.summary_extras(job, summary)
    return summary


def training_describe_extras(job: Job, body: dict[str, Any]) -> None:
    body.pop("Tags", None)
    body["ModelArtifacts"] = {"S3ModelArtifacts": job_data.model_artifact(job)}
    body["SecondaryStatus"] = job.secondary or "Starting"
    body["StoppingCondition"] = body.get("StoppingCondition") or {"MaxRuntimeInSeconds": 86400}
    body["SecondaryStatusTransitions"] = copy.deepcopy(job.transitions)
    if job.end_time is not None and job.start_time is not None:
        seconds = max(1, math.ceil(job.end_time - job.start_time))
        body["TrainingTimeInSeconds"] = seconds
        body["BillableTimeInSeconds"] = seconds


def processing_describe_extras(job: Job, body: dict[str, Any]) -> None:
    if job.exit_message:
        body["ExitMessage"] = job.exit_message[:FAILURE_REASON_LIMIT]


def training_summary_extras(job: Job, summary: dict[str, Any]) -> None:
    summary["SecondaryStatus"] = job.secondary or "Starting"
    if job.plan_arn is not None:
        summary["TrainingPlanArn"] = job.plan_arn


def processing_summary_extras(job: Job, summary: dict[str, Any]) -> None:
    if job.failure_reason:
        summary["FailureReason"] = job.failure_reason[:FAILURE_REASON_LIMIT]
