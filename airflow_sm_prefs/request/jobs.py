"""The two SageMaker job kinds described as data, so training and processing share one code path.

This is the only module that knows how the kinds differ; everything else reads these fields instead of
branching on a kind's name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.request import preferences
from airflow_sm_prefs.request.friendly_preferences import to_api_entries

# No documented service default for MaxPendingTimeInSeconds; two days is the documented limit for training-plan jobs.
DEFAULT_PENDING_SECONDS = 2 * 86400
RESOURCE_FIELDS = ("InstancePreferences", "InstanceCount", "SelectedInstanceType", "SelectedInstanceCount")
_COMMON_EVENT_FIELDS = ("FailureReason", "CreationTime", "LastModifiedTime")


@dataclass(frozen=True)
class JobKind:
    name: str
    name_field: str
    arn_field: str
    status_field: str
    operation_suffix: str
    resources_path: tuple[str, ...]
    start_field: str
    end_field: str
    console_fragment: str
    log_group: str
    integer_paths: tuple[tuple[str, ...], ...]
    validate: Callable[[Mapping[str, Any]], list[str]]
    service_enforces_pending_limit: bool
    # botocore model shapes for the check of instance types against the client in use.
    resources_shape: str
    instance_type_shape: str
    # Whether a List*Jobs summary changes when SageMaker selects a type (training: SecondaryStatus moves
    # from Pending; processing: nothing a summary shows changes until the job ends).
    summary_shows_selection: bool
    # S3 URIs for lineage: where the inputs are in the request, and the outputs in request or description.
    input_uri_paths: tuple[tuple[str, ...], ...]
    request_output_uri_paths: tuple[tuple[str, ...], ...]
    described_output_uri_paths: tuple[tuple[str, ...], ...]
    # Top-level Describe fields a resumed operator reads; nothing else travels in a trigger event (a job's
    # Environment and HyperParameters may hold secrets and must not sit in the metadata database).
    event_fields: tuple[str, ...]
    # Whether an entry may name a Flexible Training Plan (``TrainingPlanArns``): training only (P9).
    takes_training_plans: bool
    # Where the job's container image is named in the request.
    image_path: tuple[str, ...]
    # The CloudWatch namespace of the instances' metrics (the same text as the log group, by AWS's choice).
    metrics_namespace: str

    @property
    def create_method(self) -> str:
        return f"create_{self.operation_suffix}"

    @property
    def describe_method(self) -> str:
        return f"describe_{self.operation_suffix}"

    @property
    def stop_method(self) -> str:
        return f"stop_{self.operation_suffix}"

    @property
    def list_method(self) -> str:
        return f"list_{self.operation_suffix}s"

    @property
    def summaries_field(self) -> str:
        return f"{self.operation_suffix.title().replace('_', '')}Summaries"

    def resources(self, body: Mapping[str, Any]) -> dict[str, Any]:
        node: Any = body
        for key in self.resources_path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node if isinstance(node, dict) else {}

    def ensure_resources(self, body: dict[str, Any]) -> dict[str, Any]:
        node = body
        for depth, key in enumerate(self.resources_path):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                path = ".".join(self.resources_path[: depth + 1])
                raise preferences.RequestValidationError([f"{path} must be a mapping, got {type(node).__name__}"])
        return node

    def essentials(self, description: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a Describe response the operator needs to resume; safe to store (what the job says is
        passed through the secrets masker: it is kept in the task instance while the task waits)."""
        from airflow_sm_prefs.platform.redaction import redacted

        kept = {key: redacted(description[key]) for key in self.event_fields if key in description}
        resources = self.resources(description)
        node = kept
        for key in self.resources_path[:-1]:
            node = node.setdefault(key, {})
        node[self.resources_path[-1]] = {key: resources[key] for key in RESOURCE_FIELDS if key in resources}
        return kept

    def prepare(
        self,
        config: Mapping[str, Any],
        friendly_preferences: Any = None,
        max_pending: int | None = None,
    ) -> dict[str, Any]:
        """Merge the friendly arguments into the API request and cast templated integers."""
        request = copy.deepcopy(dict(config))
        if friendly_preferences is not None:
            resources = self.ensure_resources(request)
            if "InstancePreferences" in resources:
                raise preferences.RequestValidationError(
                    ["preferences are given both as `preferences=` and in config; keep one"]
                )
            if preferences.is_templated(friendly_preferences):
                resources["InstancePreferences"] = friendly_preferences
            else:
                resources["InstancePreferences"] = to_api_entries(friendly_preferences)
        if max_pending is not None and self.service_enforces_pending_limit:
            stopping = request.setdefault("StoppingCondition", {})
            if isinstance(stopping, dict):  # anything else is reported by validate()
                given = stopping.get("MaxPendingTimeInSeconds")
                if given is not None and str(given).strip() != str(max_pending):
                    raise preferences.RequestValidationError(
                        [
                            f"the pending limit is given twice and they disagree: max_pending={max_pending} and "
                            f"StoppingCondition.MaxPendingTimeInSeconds={given!r} in config; keep one"
                        ]
                    )
                stopping["MaxPendingTimeInSeconds"] = max_pending
        return preferences.cast_integers(request, self.integer_paths)


TRAINING = JobKind(
    name="training",
    name_field="TrainingJobName",
    arn_field="TrainingJobArn",
    status_field="TrainingJobStatus",
    operation_suffix="training_job",
    resources_path=("ResourceConfig",),
    start_field="TrainingStartTime",
    end_field="TrainingEndTime",
    console_fragment="jobs",
    log_group="/aws/sagemaker/TrainingJobs",
    integer_paths=(
        ("ResourceConfig", "InstanceCount"),
        ("ResourceConfig", "VolumeSizeInGB"),
        ("ResourceConfig", "KeepAlivePeriodInSeconds"),
        ("ResourceConfig", "InstancePreferences", "*", "InstanceCount"),
        ("StoppingCondition", "MaxRuntimeInSeconds"),
        ("StoppingCondition", "MaxPendingTimeInSeconds"),
        ("StoppingCondition", "MaxWaitTimeInSeconds"),
    ),
    validate=preferences.validate_training_request,
    service_enforces_pending_limit=True,
    resources_shape="ResourceConfig",
    instance_type_shape="TrainingInstanceType",
    summary_shows_selection=True,
    takes_training_plans=True,
    image_path=("AlgorithmSpecification", "TrainingImage"),
    metrics_namespace="/aws/sagemaker/TrainingJobs",
    input_uri_paths=(("InputDataConfig", "*", "DataSource", "S3DataSource", "S3Uri"),),
    request_output_uri_paths=(),
    described_output_uri_paths=(("ModelArtifacts", "S3ModelArtifacts"),),
    event_fields=(
        "TrainingJobName",
        "TrainingJobArn",
        "TrainingJobStatus",
        "SecondaryStatus",
        "SecondaryStatusTransitions",
        "TrainingStartTime",
        "TrainingEndTime",
        "BillableTimeInSeconds",
        "ModelArtifacts",
        *_COMMON_EVENT_FIELDS,
    ),
)

PROCESSING = JobKind(
    name="processing",
    name_field="ProcessingJobName",
    arn_field="ProcessingJobArn",
    status_field="ProcessingJobStatus",
    operation_suffix="processing_job",
    resources_path=("ProcessingResources", "ClusterConfig"),
    start_field="ProcessingStartTime",
    end_field="ProcessingEndTime",
    console_fragment="processing-jobs",
    log_group="/aws/sagemaker/ProcessingJobs",
    integer_paths=(
        ("ProcessingResources", "ClusterConfig", "InstanceCount"),
        ("ProcessingResources", "ClusterConfig", "VolumeSizeInGB"),
        ("ProcessingResources", "ClusterConfig", "InstancePreferences", "*", "InstanceCount"),
        ("StoppingCondition", "MaxRuntimeInSeconds"),
    ),
    validate=preferences.validate_processing_request,
    service_enforces_pending_limit=False,
    resources_shape="ProcessingClusterConfig",
    instance_type_shape="ProcessingInstanceType",
    summary_shows_selection=False,
    takes_training_plans=False,
    image_path=("AppSpecification", "ImageUri"),
    metrics_namespace="/aws/sagemaker/ProcessingJobs",
    input_uri_paths=(("ProcessingInputs", "*", "S3Input", "S3Uri"),),
    request_output_uri_paths=(("ProcessingOutputConfig", "Outputs", "*", "S3Output", "S3Uri"),),
    described_output_uri_paths=(),
    event_fields=(
        "ProcessingJobName",
        "ProcessingJobArn",
        "ProcessingJobStatus",
        "ProcessingStartTime",
        "ProcessingEndTime",
        "ExitMessage",
        *_COMMON_EVENT_FIELDS,
    ),
)

KINDS = {kind.name: kind for kind in (TRAINING, PROCESSING)}


def values_at(body: Any, path: tuple[str, ...]) -> list[Any]:
    """Every value at ``path`` in nested dicts and lists; ``"*"`` steps into each element of a list."""
    if not path:
        return [body]
    head, rest = path[0], path[1:]
    if head == "*":
        return [value for item in body for value in values_at(item, rest)] if isinstance(body, list) else []
    return values_at(body[head], rest) if isinstance(body, Mapping) and head in body else []
