"""The two SageMaker job kinds described as data, so training and processing share one code path."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs import preferences

TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})


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
        for key in self.resources_path:
            node = node.setdefault(key, {})
        return node

    def selected(self, description: Mapping[str, Any]) -> tuple[str, int] | None:
        resources = self.resources(description)
        instance_type = resources.get("SelectedInstanceType")
        if instance_type is None:
            return None
        return instance_type, int(resources.get("SelectedInstanceCount") or 0)

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
                raise preferences.PreferenceValidationError(
                    ["preferences are given both as `preferences=` and in config; keep one"]
                )
            if preferences.is_templated(friendly_preferences):
                resources["InstancePreferences"] = friendly_preferences
            else:
                resources["InstancePreferences"] = preferences.to_api_entries(friendly_preferences)
        if max_pending is not None and self.service_enforces_pending_limit:
            request.setdefault("StoppingCondition", {})["MaxPendingTimeInSeconds"] = max_pending
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
)

KINDS = {kind.name: kind for kind in (TRAINING, PROCESSING)}
