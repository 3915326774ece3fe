"""What a Flexible Training Plan bought: per plan, the instance-hours it reserved so far against those the
ledger's jobs used on it, the jobs it served, and their wait against the first choice's on the nights it was
sold out. A plan that sat idle is said so.

The reservation comes from SageMaker (``PlanState``: its instances and window); the use from the ledger (each
job's plan: ``training_plan_arn``, or for older entries the plan its selected entry named). The first choice's
wait is the report's estimate for the same tasks' fallbacks (``counterfactual.estimate``): what a job on the
plan would likely have waited had the plan not been there, on a night like those.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from airflow_sm_prefs.analysis import counterfactual
from airflow_sm_prefs.analysis.report import percentile
from airflow_sm_prefs.platform.formatting import format_seconds
from airflow_sm_prefs.sagemaker.training_plans import PlanState


def plan_of(entry: Mapping[str, Any]) -> str | None:
    """The plan a job ran on: its ledger field, else the plan its selected entry named."""
    recorded = entry.get("training_plan_arn")
    if isinstance(recorded, str):
        return recorded
    rank, listed = entry.get("selected_rank"), entry.get("preferences") or []
    if not isinstance(rank, int) or not 0 <= rank < len(listed) or not isinstance(listed[rank], Mapping):
        return None
    plans = listed[rank].get("TrainingPlanArns") or []
    return str(plans[0]) if plans else None


def reserved_hours_so_far(plan: PlanState, now: dt.datetime) -> float:
    """Instance-hours the plan has held from its start until now (or its end)."""
    if plan.start is None or now <= plan.start:
        return 0.0
    until = min(now, plan.end) if plan.end is not None else now
    return plan.total * max(0.0, (until - plan.start).total_seconds()) / 3600.0


def usage(entries: Iterable[Mapping[str, Any]], plans: Sequence[PlanState], now: dt.datetime) -> list[dict[str, Any]]:
    entries = list(entries)
    timeline = counterfactual.Timeline(entries)
    by_plan: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        arn = plan_of(entry)
        if arn is not None and entry.get("selected_instance_count") is not None:
            by_plan.setdefault(arn, []).append(entry)
    rows = []
    for plan in plans:
        served = by_plan.get(plan.arn, [])
        used = sum(int(e["selected_instance_count"]) * float(e.get("run_seconds") or 0.0) / 3600.0 for e in served)
        held = reserved_hours_so_far(plan, now)
        waits = [float(e["pending_seconds"]) for e in served]
        first_choice_wait, basis = _first_choice_wait(entries, served, timeline)
        rows.append(
            {
                "plan": plan.name,
                "arn": plan.arn,
                "status": plan.status,
                "instance_type": plan.instance_type,
                "instance_count": plan.total,
                "reserved_instance_hours": plan.instance_hours(),
                "reserved_instance_hours_so_far": round(held, 2),
                "used_instance_hours": round(used, 2),
                "used_share": round(used / held, 3) if held else None,
                "jobs": len(served),
                "tasks": sorted({counterfactual.task_of(e) for e in served}),
                "wait_p50_seconds": percentile(waits, 0.5),
                "first_choice_wait_p50_seconds": first_choice_wait,
                "first_choice_wait_basis": basis,
                "upfront_fee": plan.upfront_fee,
                "idle": held > 0 and not served,
            }
        )
    return rows


def _first_choice_wait(
    entries: Sequence[Mapping[str, Any]], served: Sequence[Mapping[str, Any]], timeline: counterfactual.Timeline
) -> tuple[float | None, str | None]:
    """The first choice's estimated wait at the times the served tasks fell back on demand (their other nights),
    and its basis (``same times``, or ``same-task history``, which is biased low)."""
    tasks = {counterfactual.task_of(e) for e in served}
    history = [e for e in entries if counterfactual.task_of(e) in tasks]
    fallbacks = [e for e in history if plan_of(e) is None and e.get("selected_rank") not in (0, None)]
    estimate = counterfactual.estimate(history, fallbacks, timeline) if fallbacks else None
    if estimate is None:
        return None, None
    return estimate.shown.p50, estimate.shown.basis


def in_words(row: Mapping[str, Any]) -> str:
    held = row["reserved_instance_hours_so_far"]
    if row["idle"]:
        return f"{row['plan']} sat idle: none of the {held:g} instance-hours it has held so far was used by a job"
    if not held:
        return f"{row['plan']} is {row['status']}: it has held no instance-hours yet"
    said = (
        f"{row['plan']}: {row['used_instance_hours']:g} of {held:g} instance-hours used "
        f"({row['used_share']:.0%}) by {row['jobs']} job(s) of {', '.join(row['tasks'])}"
    )
    if row["wait_p50_seconds"] is not None:
        said += f"; they waited a median {format_seconds(row['wait_p50_seconds'])}"
        if row["first_choice_wait_p50_seconds"] is not None:
            said += (
                f", where the first choice on demand took a median "
                f"{format_seconds(row['first_choice_wait_p50_seconds'])} on the nights it was sold out"
            )
            if row["first_choice_wait_basis"] != "same times":
                said += " (from the tasks' other nights: biased low)"
    return said


def render(rows: Sequence[Mapping[str, Any]], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(list(rows), indent=2)
    if not rows:
        return "No training plans in this account and Region."
    return "\n".join(in_words(row) for row in rows)


def report_section(
    entries: Sequence[Mapping[str, Any]],
    listed: tuple[dt.datetime, Sequence[PlanState]] | None,
    tasks: Collection[str] | None = None,
) -> list[str]:
    """The capacity report's lines on training plans: what each plan the CLI last listed bought (``listed``:
    when and what), or, with no listing kept, the jobs the ledger says ran on a plan and how to see the rest.
    ``tasks`` (``dag.task``): the report's filters kept these alone, so only the plans that served one of them
    are said (a plan another DAG used is not idle). No lines when no plan is listed and no job ran on one."""
    kept = [e for e in entries if tasks is None or counterfactual.task_of(e) in tasks]
    on_plans: dict[str, int] = {}
    for entry in kept:
        arn = plan_of(entry)
        if arn is not None:
            on_plans[arn] = on_plans.get(arn, 0) + 1
    if listed is not None and listed[1]:
        taken_at, plans = listed
        rows = [row for row in usage(entries, plans, taken_at) if tasks is None or set(row["tasks"]) & set(tasks)]
        if rows:
            heading = f"Training plans, as SageMaker listed them at {taken_at.strftime('%Y-%m-%d %H:%M UTC')}:"
            return [heading, *(f"  {in_words(row)}" for row in rows)]
    if not on_plans:
        return []
    ran = "; ".join(f"{count} job(s) on {arn.rpartition('/')[2]}" for arn, count in sorted(on_plans.items()))
    return [
        f"Training plans: {ran}. What each plan held is not known here: `airflow-sm-prefs plans used` asks "
        "SageMaker (and keeps its listing for this report and the Capacity page)."
    ]
