"""Service-side request rules for instance preference lists (spec §3), as SageMaker applies them.

Deliberately independent of ``airflow_sm_prefs.request.preferences``: this is the service's side of the wire, so
a misunderstanding shared by both would otherwise hide itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sm_prefs_devkit.emulator.errors import ResourceLimitExceeded, ResourceNotFound, ValidationException
from sm_prefs_devkit.emulator.scenario import Scenario

ACCELERATED_PREFIXES = ("ml.p", "ml.g", "ml.trn")
MAX_PREFERENCES = 5
# The account's training plan of an ARN (``training_plans.PlanBook.get``), or None.
PlanLookup = Callable[[str], Any]


def is_accelerated(instance_type: str) -> bool:
    return instance_type.startswith(ACCELERATED_PREFIXES)


@dataclass(frozen=True)
class Candidate:
    """One entry the scheduler may place the job on, resolved to a concrete count and plan."""

    rank: int
    instance_type: str
    count: int
    plan_arn: str | None


def training_candidates(request: dict[str, Any], scenario: Scenario, plans: PlanLookup) -> tuple[list[Candidate], bool]:
    """Apply R1–R24 to a CreateTrainingJob request; return its candidates and whether it used preferences."""
    resources = request.get("ResourceConfig")
    if resources is None:
        raise ValidationException("ResourceConfig is required for this emulator (InstanceType or InstancePreferences).")
    stopping = request.get("StoppingCondition") or {}
    for selected in ("SelectedInstanceType", "SelectedInstanceCount"):
        if selected in resources:
            raise ValidationException(
                f"ResourceConfig.{selected} is an output field and is not accepted on create (R20)."
            )
    if "MaxWaitTimeInSeconds" in stopping and not request.get("EnableManagedSpotTraining"):
        raise ValidationException(
            "Invalid MaxWaitTimeInSeconds. It is only supported when EnableManagedSpotTraining is set to true (R24)."
        )
    preferences = resources.get("InstancePreferences")
    if preferences is None:
        if resources.get("InstanceGroups"):
            raise ValidationException(
                "The emulator does not model heterogeneous clusters (ResourceConfig.InstanceGroups)."
            )
        instance_type = resources.get("InstanceType")
        count = resources.get("InstanceCount")
        if instance_type is None or count is None:
            raise ValidationException(
                "ResourceConfig must specify InstanceType and InstanceCount, or InstancePreferences."
            )
        _check_count(count, "ResourceConfig.InstanceCount", scenario)
        plan = resources.get("TrainingPlanArn")
        if plan is not None:
            _check_plan(plan, instance_type, count, "ResourceConfig.TrainingPlanArn", plans)
        return [Candidate(0, instance_type, count, plan)], False

    for exclusive, rule in (
        ("InstanceType", "R6"),
        ("InstanceGroups", "R7"),
        ("InstancePlacementConfig", "R8"),
    ):
        if resources.get(exclusive) is not None:
            raise ValidationException(
                f"ResourceConfig.{exclusive} and ResourceConfig.InstancePreferences are mutually exclusive ({rule})."
            )
    if request.get("EnableManagedSpotTraining"):
        raise ValidationException("InstancePreferences cannot be used with EnableManagedSpotTraining=true (R9/R10).")
    _check_list_shape(preferences, "ResourceConfig.InstancePreferences", resources.get("InstanceCount"), scenario)

    job_plan = resources.get("TrainingPlanArn")
    if job_plan is not None and any(p.get("TrainingPlanArns") for p in preferences):
        raise ValidationException(
            "ResourceConfig.TrainingPlanArn and InstancePreferences[].TrainingPlanArns are mutually exclusive (R13)."
        )
    uniform = resources.get("InstanceCount")
    for index, preference in enumerate(preferences):
        arns = preference.get("TrainingPlanArns") or []
        if len(arns) > 1:
            raise ValidationException(
                f"ResourceConfig.InstancePreferences[{index}].TrainingPlanArns: at most one training plan per "
                "preference (R11)."
            )
        for arn in arns:
            path = f"ResourceConfig.InstancePreferences[{index}].TrainingPlanArns"
            _check_plan(arn, preference["InstanceType"], preference.get("InstanceCount", uniform), path, plans)
    job_plan_type = None
    if job_plan is not None:
        if plans(job_plan) is None:
            raise ResourceNotFound(f"Training plan {job_plan} does not exist.")
        job_plan_type = plans(job_plan).instance_type
        if job_plan_type not in {p["InstanceType"] for p in preferences}:
            raise ValidationException(
                f"ResourceConfig.TrainingPlanArn is for {job_plan_type}, which matches no entry in "
                "ResourceConfig.InstancePreferences (R14)."
            )
    candidates = []
    for rank, preference in enumerate(preferences):
        arns = preference.get("TrainingPlanArns") or []
        plan_arn = arns[0] if arns else None
        if job_plan is not None and job_plan_type == preference["InstanceType"]:
            plan_arn = job_plan
        count = preference.get("InstanceCount", uniform)
        candidates.append(Candidate(rank, preference["InstanceType"], count, plan_arn))
    return candidates, True


def processing_candidates(
    request: dict[str, Any], scenario: Scenario, plans: PlanLookup
) -> tuple[list[Candidate], bool]:
    """Apply P1–P14 to a CreateProcessingJob request; return its candidates and whether it used preferences."""
    cluster = request["ProcessingResources"]["ClusterConfig"]
    for selected in ("SelectedInstanceType", "SelectedInstanceCount"):
        if selected in cluster:
            raise ValidationException(
                f"ProcessingResources.ClusterConfig.{selected} is an output field and is not accepted on create."
            )
    preferences = cluster.get("InstancePreferences")
    if preferences is None:
        instance_type = cluster.get("InstanceType")
        count = cluster.get("InstanceCount")
        if instance_type is None or count is None:
            raise ValidationException(
                "ProcessingResources.ClusterConfig must specify InstanceType and InstanceCount, or InstancePreferences."
            )
        return [Candidate(0, instance_type, count, None)], False
    if cluster.get("InstanceType") is not None:
        raise ValidationException(
            "ProcessingResources.ClusterConfig.InstanceType and InstancePreferences are mutually exclusive (P8)."
        )
    _check_list_shape(
        preferences,
        "ProcessingResources.ClusterConfig.InstancePreferences",
        cluster.get("InstanceCount"),
        scenario,
    )
    uniform = cluster.get("InstanceCount")
    return [
        Candidate(rank, p["InstanceType"], p.get("InstanceCount", uniform), None) for rank, p in enumerate(preferences)
    ], True


def _check_list_shape(preferences: list[dict[str, Any]], path: str, uniform: int | None, scenario: Scenario) -> None:
    if len(preferences) > MAX_PREFERENCES:
        raise ValidationException(
            f"Value '{len(preferences)} items' at '{path}' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_PREFERENCES} (R2/P2)."
        )
    seen: dict[str, int] = {}
    for index, preference in enumerate(preferences):
        instance_type = preference["InstanceType"]
        if instance_type in seen:
            raise ValidationException(
                f"{path}[{index}].InstanceType {instance_type} is already listed at {path}[{seen[instance_type]}]; "
                "each instance type may appear only once (R4a/P4)."
            )
        seen[instance_type] = index
    with_count = [i for i, p in enumerate(preferences) if "InstanceCount" in p]
    if with_count and uniform is not None:
        raise ValidationException(
            f"InstanceCount is set both on {path}[{with_count[0]}] and at the job level; set it in one place (R4c/P5)."
        )
    if with_count and len(with_count) != len(preferences):
        missing = next(i for i in range(len(preferences)) if i not in with_count)
        raise ValidationException(
            f"{path}[{missing}].InstanceCount is missing; set InstanceCount on every preference or on none (R4b/P5)."
        )
    if not with_count and uniform is None:
        raise ValidationException(f"InstanceCount must be set at the job level or on every entry of {path} (R4d/P5).")
    if uniform is not None:
        _check_count(uniform, path.rsplit(".", 1)[0] + ".InstanceCount", scenario)
    for index in with_count:
        _check_count(preferences[index]["InstanceCount"], f"{path}[{index}].InstanceCount", scenario)


def _check_count(count: int, path: str, scenario: Scenario) -> None:
    if count == 0 and scenario.behaviour.reject_zero_count:
        raise ValidationException(f"{path} must be at least 1 (R5).")


def _check_plan(arn: str, instance_type: str, count: int | None, path: str, plans: PlanLookup) -> None:
    plan = plans(arn)
    if plan is None:
        raise ResourceNotFound(f"Training plan {arn} does not exist ({path}).")
    if plan.instance_type != instance_type:
        raise ValidationException(
            f"{path}: plan {arn} reserves {plan.instance_type}, which must match the entry's "
            f"InstanceType {instance_type} (R12)."
        )
    if count is not None and count > plan.count:
        raise ValidationException(
            f"{path}: plan {arn} reserves {plan.count} x {plan.instance_type}, fewer than the {count} asked for."
        )


def check_algorithm(image: str | None, candidates: list[Candidate], scenario: Scenario, kind: str) -> None:
    """R18/P13: a built-in algorithm image that does not support every listed type rejects the request."""
    if not image:
        return
    for marker, supported in scenario.algorithms.items():
        if marker in image:
            unsupported = [c.instance_type for c in candidates if c.instance_type not in supported]
            if unsupported:
                raise ValidationException(
                    f"The {kind} image {image} does not support instance type(s) {', '.join(unsupported)} "
                    "listed in InstancePreferences (R18/P13)."
                )


def check_quotas(candidates: list[Candidate], in_use: dict[str, int], scenario: Scenario, usage: str) -> None:
    """R17/P12: the quota of *every* listed type must cover its count, even if an earlier type would fit."""
    for candidate in candidates:
        quota = scenario.quota_for(candidate.instance_type)
        if quota is None:
            continue
        current = in_use.get(candidate.instance_type, 0)
        if current + candidate.count > quota:
            raise ResourceLimitExceeded(
                f"The account-level service limit '{candidate.instance_type} for {usage} job usage' is {quota} "
                f"Instances, with current utilization of {current} Instances and a request delta of "
                f"{candidate.count} Instances. Please use AWS Service Quotas to request an increase for this quota.",
            )
