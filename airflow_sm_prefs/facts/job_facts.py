"""What is known of a job once the task is done with it, computed once.

The XCom record (``record``), the capacity ledger's entry (``ledger``) and through it the metrics are
projections of one ``JobFacts``: they read the same waited and run seconds, the same billed instance-seconds and
the same cost, so they cannot disagree. Billed instance-seconds follow one rule: training's
``BillableTimeInSeconds`` x instances; processing reports no billable time, so its run time x instances. The cost
is the on-demand price x those instance-seconds. How the job ended (its ``outcome``) follows one rule too
(``outcome_of``), why it failed another (``failure_cause``), and the task's own words on it (the workload it
certified against) are facts of the job as well: no projection assigns anything after it is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pendulum

from airflow_sm_prefs.facts import failure_cause
from airflow_sm_prefs.facts.utilization import Utilization
from airflow_sm_prefs.reference.prices import CostBasis, PriceTable
from airflow_sm_prefs.sagemaker import job_status
from airflow_sm_prefs.sagemaker.job_view import JobView, iso, jsonable

JobOutcome = Literal["completed", "failed_after_start", "no_capacity", "stopped"]
OUTCOMES: tuple[JobOutcome, ...] = ("completed", "failed_after_start", "no_capacity", "stopped")


def outcome_of(view: JobView, task_gave_up: bool = False) -> JobOutcome:
    """How a job ended, as the report counts it. ``task_gave_up``: the task stopped waiting on it (its pending
    bound or its deadline) and stopped it, so a job that never started had no capacity in the time allowed."""
    if task_gave_up:
        return "no_capacity" if view.started is None else "stopped"
    if job_status.succeeded(view.status):
        return "completed"
    if view.started is None:
        reason = view.failure_reason or ""
        return "no_capacity" if view.selected is None and reason.startswith("CapacityError") else "stopped"
    return "failed_after_start" if job_status.failed(view.status) else "stopped"


@dataclass(frozen=True)
class JobFacts:
    view: JobView
    region: str | None
    pending_seconds: float
    run_seconds: float | None
    billable_instance_seconds: float | None
    estimated_cost_usd: float | None
    cost_basis: CostBasis
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    outcome: JobOutcome
    # Why it failed (``failure_cause``), None when it did not: only a hardware failure counts against its type.
    failure: failure_cause.Diagnosis | None
    # The certification registry's workload the task named, and the chosen configuration's benchmark there.
    workload: str | None = None
    certified_run_seconds: float | None = None
    # How well it used its hardware (CloudWatch's instance metrics), None where they could not be read.
    utilization: Utilization | None = None

    @classmethod
    def of(
        cls,
        view: JobView,
        region: str | None,
        *,
        prices: PriceTable | None = None,
        now: pendulum.DateTime | None = None,
        certified_run_seconds: float | None = None,
        workload: str | None = None,
        task_gave_up: bool = False,
        utilization: Utilization | None = None,
    ) -> JobFacts:
        """``prices`` default to the table in effect now (shipped, with the team's over it)."""
        from airflow_sm_prefs.reference import prices as price_tables

        now = now or pendulum.now("UTC")
        run = view.run_seconds(now)
        seconds = view.billable_seconds if view.billable_seconds is not None else run
        billed = round(float(seconds) * view.selected_count, 3) if seconds is not None and view.selected_count else None
        cost = price_tables.estimate(
            prices if prices is not None else price_tables.current(),
            region=region,
            kind=view.kind.name,
            instance_type=view.selected_type,
            instance_seconds=billed,
            plan_backed=view.plan_backed,
        )
        outcome = outcome_of(view, task_gave_up)
        return cls(
            view=view,
            region=region,
            pending_seconds=round(view.pending_seconds(now), 3),
            run_seconds=round(run, 3) if run is not None else None,
            billable_instance_seconds=billed,
            estimated_cost_usd=cost.usd,
            cost_basis=cost.basis,
            created_at=iso(view.created),
            started_at=iso(view.started),
            ended_at=iso(view.ended),
            outcome=outcome,
            failure=failure_cause.of_job(outcome, view.failure_reason, view.selected_type is not None),
            workload=workload,
            certified_run_seconds=certified_run_seconds,
            utilization=utilization,
        )

    @property
    def preferences(self) -> list[dict[str, Any]]:
        return jsonable(list(self.view.preferences))  # type: ignore[no-any-return]
