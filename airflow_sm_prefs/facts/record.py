"""The chosen-configuration record: the XCom contract (documented in docs/record.md), built from a ``JobView``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from airflow_sm_prefs.sagemaker.job_view import iso

if TYPE_CHECKING:
    from airflow_sm_prefs.facts.job_facts import JobFacts


class TrainingPlanChoice(TypedDict):
    """What ``training_plans="auto"`` put first (``plan_arn``, None for none), and why."""

    plan_arn: str | None
    notes: list[str]


class DroppedPreference(TypedDict):
    """An entry the guardrails removed, and why."""

    rank: int
    entry: dict[str, Any]
    reason: str


class PreflightDecided(TypedDict):
    """What preflight decided about the list before the job was created. It is kept with the task instance's
    claim (``attempts.JobClaim.preflight``), not in XComs of its own, so the record of a retry that reattaches
    to the job says it too."""

    dropped_preferences: list[DroppedPreference]
    uncertified_preferences: list[str]
    training_plan: TrainingPlanChoice | None


class JobRecord(TypedDict):
    """The operator's return value (and XCom ``record`` when the job did not complete)."""

    job_name: str | None
    job_arn: str | None
    job_kind: str
    status: str | None
    secondary_status: str | None
    selected_instance_type: str | None
    selected_instance_count: int | None
    selected_rank: int | None
    fell_back: bool | None
    preferences: list[dict[str, Any]]
    # The Flexible Training Plan the selected preference ran on (None: on-demand, or not selected yet).
    training_plan_arn: str | None
    # training_plans="auto": the plan it put first and why, or why none; None when the task did not ask.
    training_plan: TrainingPlanChoice | None
    # Entries the guardrails removed before submission (on_violation="drop"), each with its reason.
    dropped_preferences: list[DroppedPreference]
    # certified="warn": the entries the registry does not certify for the workload, each with why.
    uncertified_preferences: list[str]
    # The chosen configuration's benchmark in the certification registry, and this run against it.
    certified_run_seconds: float | None
    run_time_vs_certified: float | None
    pending_seconds: float
    run_seconds: float | None
    billable_seconds: int | None
    billable_instance_seconds: float | None
    # On-demand prices x billed instance-seconds; None when unknown (see cost_basis), never a made-up 0.
    estimated_cost_usd: float | None
    cost_basis: str
    failure_reason: str | None
    # Why it failed (docs/report.md, "Why a job failed"): configuration, hardware, code, capacity, service or
    # unknown, and the rule that said so; None when it did not fail.
    failure_cause: str | None
    failure_cause_rule: str | None
    # How well the job used its hardware, per metric (gpu, gpu_memory, cpu, memory) its mean and p90 in percent of
    # one device over hosts and minutes; None when CloudWatch's metrics could not be read (see the task log).
    utilization: dict[str, dict[str, float] | None] | None
    region: str | None
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    last_modified_at: str | None


def build(facts: JobFacts, decided: PreflightDecided | None = None) -> JobRecord:
    view, run, certified_run_seconds = facts.view, facts.run_seconds, facts.certified_run_seconds
    decided = decided or PreflightDecided(dropped_preferences=[], uncertified_preferences=[], training_plan=None)
    return JobRecord(
        job_name=view.name,
        job_arn=view.arn,
        job_kind=view.kind.name,
        status=view.status,
        secondary_status=view.secondary_status,
        selected_instance_type=view.selected_type,
        selected_instance_count=view.selected_count,
        selected_rank=view.selected_rank,
        fell_back=view.fell_back,
        preferences=facts.preferences,
        training_plan_arn=view.plan_arn,
        training_plan=decided["training_plan"],
        dropped_preferences=list(decided["dropped_preferences"]),
        uncertified_preferences=list(decided["uncertified_preferences"]),
        certified_run_seconds=certified_run_seconds,
        run_time_vs_certified=round(run / certified_run_seconds, 3)
        if run is not None and certified_run_seconds
        else None,
        pending_seconds=facts.pending_seconds,
        run_seconds=run,
        billable_seconds=view.billable_seconds,
        billable_instance_seconds=facts.billable_instance_seconds,
        estimated_cost_usd=facts.estimated_cost_usd,
        cost_basis=facts.cost_basis,
        failure_reason=view.failure_reason,
        failure_cause=facts.failure.cause if facts.failure else None,
        failure_cause_rule=facts.failure.because if facts.failure else None,
        utilization=facts.utilization.as_json() if facts.utilization else None,
        region=facts.region,
        created_at=facts.created_at,
        started_at=facts.started_at,
        ended_at=facts.ended_at,
        last_modified_at=iso(view.last_modified),
    )
