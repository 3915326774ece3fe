"""Preference lists as values, and every rule SageMaker would reject them for that can be checked locally.

Pure Python: no Airflow, no boto3, so DAG files can validate at parse time for almost nothing. Every error
names the rule (R* for training, P* for processing; the catalogue is docs/rules.md, which a test keeps
complete) and the preference it concerns.
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError

MAX_PREFERENCES = 5
MAX_PENDING_RANGE = (1800, 2419200)  # botocore's model: 30 minutes to 28 days
MAX_DURATION_SECONDS = 366 * 86400
PROCESSING_COUNT_RANGE = (1, 100)
ACCELERATED_PREFIXES = ("ml.p", "ml.g", "ml.trn")
INSTANCE_TYPE_SHAPE = re.compile(r"ml\.[a-z0-9-]+\.[a-z0-9]+")
PLAN_ARN_SHAPE = re.compile(r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*")
JOB_NAME_SHAPE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
REGION_SHAPE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d+")  # us-east-1, eu-central-2, us-gov-west-1, cn-north-1
MAX_JOB_NAME = 63
# Jinja's default variable, block and comment delimiters; a DAG's jinja_environment_kwargs may change them.
TEMPLATE_MARKERS = ("{{", "{%", "{#")
_markers: ContextVar[tuple[str, ...]] = ContextVar("template_markers", default=TEMPLATE_MARKERS)


@contextlib.contextmanager
def template_markers(markers: tuple[str, ...]) -> Iterator[None]:
    """Judge "is this templated?" by ``markers``: a DAG's own delimiters, or none once everything is rendered."""
    token = _markers.set(markers)
    try:
        yield
    finally:
        _markers.reset(token)


class RequestValidationError(SageMakerPreferencesError, ValueError):
    """A task's request or arguments that break a rule (SageMaker's, or this package's own for its arguments:
    guardrails, ``finish_by``, ``training_plans``, certification); ``problems`` lists every one, each naming its
    entry or argument."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n  - ".join(self.problems)
        super().__init__(f"invalid SageMaker request ({len(self.problems)} problem(s)):\n  - {lines}")


# Its name until 0.2, when it was raised for arguments that are not preferences too: kept for code that catches it.
PreferenceValidationError = RequestValidationError


def duration_seconds(value: Any, name: str) -> int | None:
    """A duration argument (``timedelta`` or seconds) as whole seconds; a clear error for anything else."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        hint = " (durations such as '4h' are not parsed: use timedelta(hours=4))" if isinstance(value, str) else ""
        raise RequestValidationError(
            [f"{name} must be a timedelta or a number of seconds, got {type(value).__name__} {brief(value)}{hint}"]
        )
    if not math.isfinite(seconds) or seconds < 1:
        raise RequestValidationError([f"{name} must be at least one second, got {brief(value)}"])
    if seconds > MAX_DURATION_SECONDS:
        raise RequestValidationError([f"{name} must be at most {MAX_DURATION_SECONDS} seconds (one year)"])
    return int(seconds)


def interval_seconds(value: Any, name: str) -> float:
    """A polling interval in seconds: a positive, finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise RequestValidationError([f"{name} must be a positive number of seconds, got {brief(value)}"])
    return float(value)


def brief(value: Any) -> str:
    """``value`` as a message quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_templated(value: Any) -> bool:
    """True when ``value`` still holds Jinja that Airflow renders later (so it cannot be judged yet)."""
    if isinstance(value, str):
        return any(marker in value for marker in _markers.get())
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
                    walk(item, rest, _label(index, item))
            return
        if not isinstance(node, dict) or head not in node:
            return
        # Entries of a preference list are named as everywhere else: "preference #2 (ml.g5.48xlarge)".
        where = (f"{trail}: {head}" if trail.startswith("preference #") else f"{trail}.{head}") if trail else head
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
                problems.append(f"{where}: expected an integer, got {brief(value)}")
        elif isinstance(value, float) and value.is_integer():
            node[head] = int(value)

    for path in paths:
        walk(result, path, "")
    if problems:
        raise RequestValidationError(problems)
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
    if isinstance(entries, str) and is_templated(entries):
        return problems  # the whole list is one template; each templated value inside a list is skipped alone
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
    if isinstance(plans, str) and is_templated(plans):
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


def job_name_problems(name: Any, field: str) -> list[str]:
    """SageMaker's job-name rules, length first (a name too long is usually a template gone wrong)."""
    if name is None or is_templated(name):
        return []
    if not isinstance(name, str):
        return [f"{field} must be a string, got {type(name).__name__}"]
    if len(name) > MAX_JOB_NAME:
        return [f"{field} is {len(name)} characters long; SageMaker allows at most {MAX_JOB_NAME}: {brief(name)}"]
    if not JOB_NAME_SHAPE.fullmatch(name):
        return [f"{field} {brief(name)} must be letters, digits and hyphens, starting with a letter or digit"]
    return []


def _check_job_name(request: Mapping[str, Any], field: str) -> list[str]:
    return job_name_problems(request.get(field), field)


@dataclass(frozen=True)
class IntegerRange:
    """An integer field of a request and the range botocore's model gives it."""

    path: tuple[str, ...]
    minimum: int
    maximum: int | None
    rule: str


def _check_ranges(request: Mapping[str, Any], ranges: Iterable[IntegerRange]) -> list[str]:
    problems = []
    for field_range in ranges:
        node: Any = request
        for key in field_range.path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is None or is_templated(node):
            continue
        where = ".".join(field_range.path)
        if isinstance(node, bool) or not isinstance(node, int):
            problems.append(f"{where} must be an integer, got {brief(node)} [{field_range.rule}]")
            continue
        low, high = field_range.minimum, field_range.maximum
        if node < low or (high is not None and node > high):
            bounds = f"{low} to {high}" if high is not None else f"at least {low}"
            problems.append(f"{where} must be {bounds}, got {node} [{field_range.rule}]")
    return problems


def _structure_problems(request: Mapping[str, Any], paths: Iterable[tuple[str, ...]]) -> list[str]:
    """Each of ``paths`` that is present must be a mapping (``ResourceConfig: None`` is not one)."""
    problems = []
    for path in paths:
        node: Any = request
        for depth, key in enumerate(path):
            if not isinstance(node, Mapping) or key not in node:
                break
            node = node[key]
            if not isinstance(node, Mapping) and not is_templated(node):
                problems.append(f"{'.'.join(path[: depth + 1])} must be a mapping, got {type(node).__name__}")
                break
    return problems


_TRAINING_RANGES = (
    IntegerRange(("ResourceConfig", "VolumeSizeInGB"), 0, None, "R26"),
    IntegerRange(("ResourceConfig", "KeepAlivePeriodInSeconds"), 0, 21600, "R26"),
    IntegerRange(("StoppingCondition", "MaxRuntimeInSeconds"), 1, None, "R26"),
)
_PROCESSING_RANGES = (
    IntegerRange(("ProcessingResources", "ClusterConfig", "VolumeSizeInGB"), 1, 16384, "P15"),
    IntegerRange(("StoppingCondition", "MaxRuntimeInSeconds"), 1, 777600, "P15"),
)


def validate_training_request(request: Mapping[str, Any]) -> list[str]:
    """Check a CreateTrainingJob request; raise RequestValidationError, or return warnings."""
    problems = _check_job_name(request, "TrainingJobName")
    malformed = _structure_problems(request, [("ResourceConfig",), ("StoppingCondition",)])
    if malformed:
        raise RequestValidationError(problems + malformed)
    problems += _check_ranges(request, _TRAINING_RANGES)
    resources = request.get("ResourceConfig")
    stopping = request.get("StoppingCondition") or {}
    if not isinstance(resources, Mapping) or "InstancePreferences" not in resources:
        raise RequestValidationError(
            [*problems, "ResourceConfig.InstancePreferences is required: pass `preferences=` or put the list in config"]
        )
    for exclusive, rule in (("InstanceType", "R6"), ("InstanceGroups", "R7"), ("InstancePlacementConfig", "R8")):
        if resources.get(exclusive) is not None:
            problems.append(f"ResourceConfig.{exclusive} cannot be combined with InstancePreferences [{rule}]")
    for output_only in ("SelectedInstanceType", "SelectedInstanceCount"):
        if output_only in resources:
            problems.append(f"ResourceConfig.{output_only} is reported by SageMaker, not sent to it [R20]")
    spot = request.get("EnableManagedSpotTraining")
    if isinstance(spot, str) and not is_templated(spot):
        spot = {"true": True, "false": False}.get(spot.strip().lower(), spot)  # a template's rendering
    if spot is True:
        problems.append("EnableManagedSpotTraining=true cannot be combined with InstancePreferences [R9/R10]")
    elif spot is not None and not isinstance(spot, bool) and not (isinstance(spot, str) and is_templated(spot)):
        # SageMaker's model takes a boolean only: 1 or "yes" is refused when the job is created.
        problems.append(
            f"EnableManagedSpotTraining must be true or false, got {spot!r:.40}; and with InstancePreferences "
            "only false [R9/R10]"
        )
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
        raise RequestValidationError(problems)
    return warnings


def validate_processing_request(request: Mapping[str, Any]) -> list[str]:
    """Check a CreateProcessingJob request; raise RequestValidationError, or return warnings."""
    problems = _check_job_name(request, "ProcessingJobName")
    malformed = _structure_problems(request, [("ProcessingResources", "ClusterConfig"), ("StoppingCondition",)])
    if malformed:
        raise RequestValidationError(problems + malformed)
    problems += _check_ranges(request, _PROCESSING_RANGES)
    resources = request.get("ProcessingResources")
    cluster = resources.get("ClusterConfig") if isinstance(resources, Mapping) else None
    if not isinstance(cluster, Mapping) or "InstancePreferences" not in cluster:
        raise RequestValidationError(
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
        raise RequestValidationError(problems)
    return []
