"""Preference lists as values, and every rule SageMaker would reject them for that can be checked locally.

Pure Python: no Airflow, no boto3, so DAG files can validate at parse time for almost nothing. Every error
names the rule (R* for training, P* for processing; the catalogue is docs/rules.md, which a test keeps
complete) and the preference it concerns.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

MAX_PREFERENCES = 5
MAX_PENDING_RANGE = (1800, 2419200)  # botocore's model: 30 minutes to 28 days
PROCESSING_COUNT_RANGE = (1, 100)
ACCELERATED_PREFIXES = ("ml.p", "ml.g", "ml.trn")
INSTANCE_TYPE_SHAPE = re.compile(r"ml\.[a-z0-9-]+\.[a-z0-9]+")
PLAN_ARN_SHAPE = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*")
JOB_NAME_SHAPE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
TEMPLATE_MARKERS = ("{{", "{%")


class PreferenceValidationError(ValueError):
    """A request SageMaker would reject; ``problems`` lists every broken rule, each naming its entry."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n  - ".join(self.problems)
        super().__init__(f"invalid SageMaker request ({len(self.problems)} problem(s)):\n  - {lines}")


@dataclass(frozen=True)
class InstancePreference:
    """One acceptable configuration: an instance type, optionally its own count and a training plan."""

    instance_type: str
    instance_count: int | None = None
    training_plan_arn: str | None = None

    def to_api(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"InstanceType": self.instance_type}
        if self.instance_count is not None:
            entry["InstanceCount"] = self.instance_count
        if self.training_plan_arn is not None:
            entry["TrainingPlanArns"] = [self.training_plan_arn]
        return entry


PreferenceLike = InstancePreference | Mapping[str, Any] | str | tuple[str, int]

_FRIENDLY_KEYS = {
    "instance_type": "InstanceType",
    "instance_count": "InstanceCount",
    "count": "InstanceCount",
    "training_plan_arn": "TrainingPlanArns",
}


def to_api_entries(preferences: Iterable[PreferenceLike]) -> list[dict[str, Any]]:
    """Turn the friendly forms (objects, snake_case dicts, ``"ml.x"`` or ``("ml.x", 2)``) into API entries."""
    entries = []
    for index, preference in enumerate(preferences):
        if isinstance(preference, InstancePreference):
            entries.append(preference.to_api())
        elif isinstance(preference, str):
            entries.append({"InstanceType": preference})
        elif isinstance(preference, tuple) and len(preference) == 2:
            entries.append({"InstanceType": preference[0], "InstanceCount": preference[1]})
        elif isinstance(preference, Mapping):
            entry: dict[str, Any] = {}
            for key, value in preference.items():
                api_key = _FRIENDLY_KEYS.get(key, key)
                if api_key == "TrainingPlanArns" and isinstance(value, str):
                    value = [value]
                entry[api_key] = value
            entries.append(entry)
        else:
            raise PreferenceValidationError(
                [
                    f"preference #{index + 1}: expected InstancePreference, a mapping, a type name or (type, count); "
                    f"got {type(preference).__name__}"
                ]
            )
    return entries


def max_pending_seconds(value: timedelta | int | float | None) -> int | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    return int(seconds)


def is_templated(value: Any) -> bool:
    """True when ``value`` still holds Jinja that Airflow renders later (so it cannot be judged yet)."""
    if isinstance(value, str):
        return any(marker in value for marker in TEMPLATE_MARKERS)
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(is_templated(v) for v in value)
    return False


def is_accelerated(instance_type: str) -> bool:
    return instance_type.startswith(ACCELERATED_PREFIXES)


def _label(index: int, entry: Any) -> str:
    instance_type = entry.get("InstanceType") if isinstance(entry, Mapping) else None
    return f"preference #{index + 1}" + (f" ({instance_type})" if isinstance(instance_type, str) else "")


def cast_integers(request: dict[str, Any], paths: Iterable[tuple[str, ...]]) -> dict[str, Any]:
    """Cast Jinja-rendered integer strings ("2") at ``paths`` to int; a non-number is a clear error.

    A path element ``"*"`` walks every item of a list, so ``InstancePreferences[].InstanceCount`` is covered.
    """
    result = copy.deepcopy(request)
    problems: list[str] = []

    def walk(node: Any, path: tuple[str, ...], trail: str) -> None:
        if not path:
            return
        head, rest = path[0], path[1:]
        if head == "*":
            if isinstance(node, list):
                for index, item in enumerate(node):
                    walk(item, rest, f"{trail}[{index}]")
            return
        if not isinstance(node, dict) or head not in node:
            return
        where = f"{trail}.{head}" if trail else head
        if rest:
            walk(node[head], rest, where)
            return
        value = node[head]
        if is_templated(value):
            return
        if isinstance(value, str):
            text = value.strip()
            if re.fullmatch(r"[+-]?\d+", text):
                node[head] = int(text)
            else:
                problems.append(f"{where}: expected an integer, got {value!r}")
        elif isinstance(value, float) and value.is_integer():
            node[head] = int(value)

    for path in paths:
        walk(result, path, "")
    if problems:
        raise PreferenceValidationError(problems)
    return result


@dataclass(frozen=True)
class _ListRules:
    """What differs between the training and processing preference lists."""

    path: str
    count_minimum: int
    count_maximum: int | None
    plans_allowed: bool
    count_rule: str
    duplicate_rule: str
    size_rule: str


_TRAINING = _ListRules("ResourceConfig.InstancePreferences", 1, None, True, "R4", "R4a", "R2")
_PROCESSING = _ListRules(
    "ProcessingResources.ClusterConfig.InstancePreferences", *PROCESSING_COUNT_RANGE, False, "P5", "P4", "P2"
)


def _check_count(value: Any, where: str, rules: _ListRules, rule: str) -> str | None:
    if is_templated(value):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{where}: InstanceCount must be an integer, got {value!r} [{rule}]"
    if value < rules.count_minimum:
        return f"{where}: InstanceCount must be at least {rules.count_minimum}, got {value} [{rule}]"
    if rules.count_maximum is not None and value > rules.count_maximum:
        return f"{where}: InstanceCount must be at most {rules.count_maximum}, got {value} [{rule}]"
    return None


def _check_list(entries: Any, uniform_count: Any, rules: _ListRules) -> list[str]:
    problems: list[str] = []
    if is_templated(entries):
        return problems
    if not isinstance(entries, list):
        return [f"{rules.path} must be a list of preferences, got {type(entries).__name__}"]
    if not entries:
        return [f"{rules.path}: the preference list is empty; give 1 to {MAX_PREFERENCES} entries [R1/P1]"]
    if len(entries) > MAX_PREFERENCES:
        problems.append(
            f"{rules.path}: {len(entries)} preferences given; SageMaker accepts at most {MAX_PREFERENCES} "
            f"[{rules.size_rule}]"
        )
    seen: dict[str, int] = {}
    with_count: list[int] = []
    for index, entry in enumerate(entries):
        label = _label(index, entry)
        if not isinstance(entry, Mapping):
            problems.append(f"{label}: expected a mapping, got {type(entry).__name__}")
            continue
        unknown = sorted(set(entry) - {"InstanceType", "InstanceCount", "TrainingPlanArns"})
        if "TrainingPlanArns" in entry and not rules.plans_allowed:
            problems.append(f"{label}: processing jobs cannot use training plans (TrainingPlanArns) [P9]")
        if unknown:
            problems.append(f"{label}: unknown field(s) {', '.join(unknown)}")
        instance_type = entry.get("InstanceType")
        if not instance_type:
            problems.append(f"{label}: InstanceType is required [R3/P3]")
        elif not is_templated(instance_type):
            if not isinstance(instance_type, str) or not INSTANCE_TYPE_SHAPE.fullmatch(instance_type):
                problems.append(f"{label}: {instance_type!r} is not an instance type such as 'ml.g5.48xlarge' [R19]")
            elif instance_type in seen:
                problems.append(
                    f"{label}: {instance_type} is already preference #{seen[instance_type] + 1}; each type may "
                    f"appear only once [{rules.duplicate_rule}]"
                )
            else:
                seen[instance_type] = index
        if "InstanceCount" in entry:
            with_count.append(index)
            problem = _check_count(entry["InstanceCount"], label, rules, rules.count_rule)
            if problem:
                problems.append(problem)
        if rules.plans_allowed and "TrainingPlanArns" in entry:
            problems += _check_plan_list(entry["TrainingPlanArns"], label)
    if with_count and uniform_count is not None:
        problems.append(
            f"{_label(with_count[0], entries[with_count[0]])}: InstanceCount is set both here and at the job "
            f"level; set it on every preference or once for the job [{rules.count_rule}c]"
        )
    elif with_count and len(with_count) != len(entries):
        missing = next(i for i in range(len(entries)) if i not in with_count)
        problems.append(
            f"{_label(missing, entries[missing])}: InstanceCount must be set on every preference or on none "
            f"[{rules.count_rule}b]"
        )
    elif not with_count and uniform_count is None:
        problems.append(
            f"{rules.path}: no InstanceCount given; set it on every preference or once for the job "
            f"[{rules.count_rule}d]"
        )
    elif uniform_count is not None:
        problem = _check_count(uniform_count, "job-level InstanceCount", rules, rules.count_rule)
        if problem:
            problems.append(problem)
    return problems


def _check_plan_list(plans: Any, label: str) -> list[str]:
    if is_templated(plans):
        return []
    if not isinstance(plans, list) or len(plans) != 1:
        return [f"{label}: TrainingPlanArns must hold exactly one training plan ARN [R11]"]
    return [f"{label}: {problem}" for problem in _check_plan_arn(plans[0])]


def _check_plan_arn(arn: Any) -> list[str]:
    if is_templated(arn):
        return []
    if not isinstance(arn, str) or not 50 <= len(arn) <= 2048:
        return [f"training plan ARN {arn!r} must be 50 to 2048 characters [R15/R16]"]
    if not PLAN_ARN_SHAPE.fullmatch(arn):
        return [f"training plan ARN {arn!r} is not a SageMaker training-plan ARN [R16]"]
    return []


def _check_job_name(request: Mapping[str, Any], field: str) -> list[str]:
    name = request.get(field)
    if name is None or is_templated(name):
        return []
    if not isinstance(name, str) or not JOB_NAME_SHAPE.fullmatch(name):
        return [f"{field} {name!r} must be 1-63 letters, digits and hyphens, starting with a letter or digit"]
    return []


def validate_training_request(request: Mapping[str, Any]) -> list[str]:
    """Check a CreateTrainingJob request; raise PreferenceValidationError, or return warnings."""
    problems = _check_job_name(request, "TrainingJobName")
    resources = request.get("ResourceConfig")
    stopping = request.get("StoppingCondition") or {}
    if not isinstance(resources, Mapping) or "InstancePreferences" not in resources:
        raise PreferenceValidationError(
            [*problems, "ResourceConfig.InstancePreferences is required: pass `preferences=` or put the list in config"]
        )
    for exclusive, rule in (("InstanceType", "R6"), ("InstanceGroups", "R7"), ("InstancePlacementConfig", "R8")):
        if resources.get(exclusive) is not None:
            problems.append(f"ResourceConfig.{exclusive} cannot be combined with InstancePreferences [{rule}]")
    for output_only in ("SelectedInstanceType", "SelectedInstanceCount"):
        if output_only in resources:
            problems.append(f"ResourceConfig.{output_only} is reported by SageMaker, not sent to it [R20]")
    spot = request.get("EnableManagedSpotTraining")
    if spot is True or (isinstance(spot, str) and spot.lower() == "true"):
        problems.append("EnableManagedSpotTraining=true cannot be combined with InstancePreferences [R9/R10]")
    if "MaxWaitTimeInSeconds" in stopping:
        problems.append("StoppingCondition.MaxWaitTimeInSeconds applies only to managed Spot training [R24]")
    entries = resources["InstancePreferences"]
    problems += _check_list(entries, resources.get("InstanceCount"), _TRAINING)
    job_plan = resources.get("TrainingPlanArn")
    if job_plan is not None:
        problems += _check_plan_arn(job_plan)
        if isinstance(entries, list) and any(isinstance(e, Mapping) and "TrainingPlanArns" in e for e in entries):
            problems.append(
                "ResourceConfig.TrainingPlanArn and per-preference TrainingPlanArns cannot both be set [R13]"
            )
    warnings: list[str] = []
    pending = stopping.get("MaxPendingTimeInSeconds")
    if pending is not None and not is_templated(pending):
        low, high = MAX_PENDING_RANGE
        if isinstance(pending, bool) or not isinstance(pending, int):
            problems.append(f"StoppingCondition.MaxPendingTimeInSeconds must be an integer, got {pending!r} [R23]")
        elif not low <= pending <= high:
            problems.append(
                f"StoppingCondition.MaxPendingTimeInSeconds must be {low} to {high} seconds (30 min to 28 days), "
                f"got {pending} [R21/R22]"
            )
        elif (
            isinstance(entries, list)
            and not is_templated(entries)
            and entries
            and all(isinstance(e, Mapping) and isinstance(e.get("InstanceType"), str) for e in entries)
            and not any(is_accelerated(e["InstanceType"]) for e in entries)
        ):
            warnings.append(
                "MaxPendingTimeInSeconds has no effect: no preference is an accelerated type (ml.p*, ml.g*, "
                "ml.trn*), and SageMaker does not queue CPU-only lists; it fails them with a capacity error instead"
            )
    if problems:
        raise PreferenceValidationError(problems)
    return warnings


def validate_processing_request(request: Mapping[str, Any]) -> list[str]:
    """Check a CreateProcessingJob request; raise PreferenceValidationError, or return warnings."""
    problems = _check_job_name(request, "ProcessingJobName")
    resources = request.get("ProcessingResources")
    cluster = resources.get("ClusterConfig") if isinstance(resources, Mapping) else None
    if not isinstance(cluster, Mapping) or "InstancePreferences" not in cluster:
        raise PreferenceValidationError(
            [
                *problems,
                "ProcessingResources.ClusterConfig.InstancePreferences is required: pass `preferences=` or put the "
                "list in config",
            ]
        )
    if cluster.get("InstanceType") is not None:
        problems.append("ClusterConfig.InstanceType cannot be combined with InstancePreferences [P8]")
    for output_only in ("SelectedInstanceType", "SelectedInstanceCount"):
        if output_only in cluster:
            problems.append(f"ClusterConfig.{output_only} is reported by SageMaker, not sent to it")
    if "VolumeSizeInGB" not in cluster:
        problems.append("ProcessingResources.ClusterConfig.VolumeSizeInGB is required [P11]")
    stopping = request.get("StoppingCondition")
    if stopping is not None:
        if "MaxPendingTimeInSeconds" in stopping:
            problems.append(
                "StoppingCondition.MaxPendingTimeInSeconds does not exist for processing jobs; use the operator's "
                "`max_pending` to give up waiting for capacity [P10]"
            )
        if "MaxRuntimeInSeconds" not in stopping:
            problems.append("StoppingCondition needs MaxRuntimeInSeconds when present [P14]")
    problems += _check_list(cluster["InstancePreferences"], cluster.get("InstanceCount"), _PROCESSING)
    if problems:
        raise PreferenceValidationError(problems)
    return []
