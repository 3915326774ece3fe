"""When a Flexible Training Plan would pay: the ledger's evidence of a first choice that is sold out, weighed
against what SageMaker asks for reserving it.

For each group of tasks that share a first choice (type and count, in one Region), from their jobs:

- the demand: jobs per day, and instance-hours by hour of the week (when a plan must hold the instances);
- how often the first choice was sold out: a job that did not get it, or waited more than ``SOLD_OUT_WAIT`` for
  it; the share ``p`` with a 90 % Wilson interval (the estimate's spread);
- what a sold-out night cost: the fallback's price, and its delay (its wait and run against the first choice's
  run), priced at ``value_per_hour`` (default 0: money only); for a task that never fell back (it waited for its
  first choice, or gave up), the first choice's price, its work being done later, and its wait priced;
- each task of the group priced on its own, then weighed by its share of the group's jobs: a day-long task and a
  ten-minute one sharing a first choice are not given one median cost;
- the first choice's wait had the list held it alone (``counterfactual.estimate``).

Three options over an offering's window, each with its time to result (p50, p90) and expected cost: keep the
list (fall back), keep waiting for the first choice, reserve the offering (every job of the window runs on the
plan at once, for the upfront fee). The break-even is the share of sold-out nights above which the plan costs
less than the list: ``p* = (fee per job - first choice's cost) / (sold-out night's cost - first choice's cost)``;
the plan pays when the interval lies above ``p*``, does not when it lies below, and cannot be told apart
otherwise. Fewer than ``MIN_JOBS`` jobs is too little evidence to say.

What it does not know, and says: offerings change by the hour; a job that does not fit the plan's window or
instances runs on demand instead; the first choice's run time is the median of its runs on this group.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.analysis import counterfactual
from airflow_sm_prefs.analysis.counterfactual import Configuration, Timeline
from airflow_sm_prefs.analysis.report import percentile
from airflow_sm_prefs.analysis.survival import kaplan_meier
from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.request.jobs import KINDS
from airflow_sm_prefs.sagemaker.training_plans import Offering

SOLD_OUT_WAIT = 900.0  # a first choice that took longer than this to get counts as sold out that night
MIN_JOBS = 5
NO_OFFERING = "SageMaker offered no plan for this window"
Z_90 = 1.6449  # the normal quantile of a two-sided 90 % interval
DAY = 86400.0


class NoOfferings(SageMakerPreferencesError):
    """Why a group was advised without offerings (a type no plan reserves, a search that failed): said as is."""


@dataclass(frozen=True)
class TaskCosts:
    """One task's prices within a group: a job on the first choice, and a night its first choice was sold out."""

    task: str
    jobs: int
    first_cost_usd: float | None  # the median cost of its jobs on the first choice
    sold_out_jobs: int
    fell_back: bool  # some sold-out job of it got a fallback (whether or not it then completed)
    fallback_cost_usd: float | None  # the median cost of its jobs that fell back
    fallback_delay_seconds: float | None  # their median wait + run, less the first choice's median run
    sold_out_wait_seconds: float | None  # without a fallback: the median wait of its sold-out jobs (at least)

    def sold_out_cost(self, value_per_hour: float) -> float | None:
        """A sold-out night of this task: its fallback's price and delay; without a fallback, the first choice's
        price (the work is done later) and the wait; None when a price is unknown or it was never sold out."""
        if not self.sold_out_jobs:
            return None
        if self.fell_back:
            if self.fallback_cost_usd is None:
                return None
            return self.fallback_cost_usd + value_per_hour * (self.fallback_delay_seconds or 0.0) / 3600.0
        if self.first_cost_usd is None:
            return None
        return self.first_cost_usd + value_per_hour * (self.sold_out_wait_seconds or 0.0) / 3600.0


def weighed(figures: Iterable[tuple[int, float | None]]) -> float | None:
    """The mean of the known figures, each weighed by its task's jobs; None when none is known."""
    known = [(jobs, figure) for jobs, figure in figures if figure is not None]
    total = sum(jobs for jobs, _ in known)
    return sum(jobs * figure for jobs, figure in known) / total if total else None


@dataclass(frozen=True)
class Demand:
    """What a group of tasks sharing a first choice asked of it, and how the first choice answered."""

    region: str | None
    first_choice: Configuration
    tasks: tuple[str, ...]
    task_keys: tuple[tuple[str, str], ...]  # (DAG id, task id): "a.b.c" alone cannot say which DAG it names
    jobs: int
    sold_out: int
    jobs_per_day: float
    instance_hours_by_hour_of_week: dict[int, float]
    first_run_seconds: tuple[float, ...]  # completed runs on the first choice
    finishes: tuple[tuple[float, bool], ...]  # each job's time to result as the list ran (False: none)
    had_room_finishes: tuple[tuple[float, bool], ...]  # the same, of the jobs that found the first choice free
    first_choice_waits: tuple[tuple[float, bool], ...]  # the first choice's estimated wait on each sold-out job
    task_costs: tuple[TaskCosts, ...]  # each task's prices, by task

    def first_choice_cost(self) -> float | None:
        """A job on the first choice, the group's tasks weighed by their jobs."""
        return weighed((task.jobs, task.first_cost_usd) for task in self.task_costs)

    def sold_out_cost(self, value_per_hour: float) -> float | None:
        """A job on a sold-out night, the tasks that were ever sold out weighed by their jobs; None when one of
        them has an unknown price (a guess would move the verdict)."""
        seen = [task for task in self.task_costs if task.sold_out_jobs]
        costs = [(task.jobs, task.sold_out_cost(value_per_hour)) for task in seen]
        if not seen or any(cost is None for _, cost in costs):
            return None
        return weighed(costs)

    @property
    def sold_out_share(self) -> float:
        return self.sold_out / self.jobs if self.jobs else 0.0

    def sold_out_interval(self) -> tuple[float, float]:
        """The 90 % Wilson interval of the sold-out share: how far the evidence pins it down."""
        return wilson(self.sold_out, self.jobs)


def wilson(successes: int, trials: int, z: float = Z_90) -> tuple[float, float]:
    if trials == 0:
        return 0.0, 1.0
    share = successes / trials
    centre = (share + z * z / (2 * trials)) / (1 + z * z / trials)
    spread = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - spread), min(1.0, centre + spread)


def was_sold_out(entry: Mapping[str, Any]) -> bool:
    """The first choice was not had at once: the job got another entry, nothing, or waited long for it."""
    return entry.get("selected_rank") != 0 or float(entry["pending_seconds"]) > SOLD_OUT_WAIT


def groups(entries: Iterable[Mapping[str, Any]]) -> dict[tuple[str | None, Configuration], list[Mapping[str, Any]]]:
    """Training jobs by Region and first choice (the type and count a plan would hold)."""
    found: dict[tuple[str | None, Configuration], list[Mapping[str, Any]]] = defaultdict(list)
    for entry in entries:
        listed = counterfactual.listed(entry)
        kind = KINDS.get(str(entry.get("job_kind")))
        if kind is not None and kind.takes_training_plans and listed and counterfactual.created(entry) is not None:
            found[(entry.get("region"), listed[0])].append(entry)
    return found


def task_costs(jobs: Sequence[Mapping[str, Any]], group_first_run: float | None) -> TaskCosts:
    """One task's jobs of a group, priced (``group_first_run`` stands in for a task never run on the first
    choice when its fallback's delay is measured)."""
    completed = [job for job in jobs if _completed(job)]
    on_first = [job for job in completed if job.get("selected_rank") == 0]
    fallbacks = [job for job in completed if job.get("selected_rank") not in (0, None)]
    sold_out = [job for job in jobs if was_sold_out(job)]
    first_run = percentile([float(job["run_seconds"]) for job in on_first], 0.5)
    first_run = group_first_run if first_run is None else first_run
    fallback_finish = percentile([float(job["pending_seconds"]) + float(job["run_seconds"]) for job in fallbacks], 0.5)
    return TaskCosts(
        task=counterfactual.task_of(jobs[0]),
        jobs=len(jobs),
        first_cost_usd=_median_cost(on_first),
        sold_out_jobs=len(sold_out),
        fell_back=any(job.get("selected_rank") not in (0, None) for job in sold_out),
        fallback_cost_usd=_median_cost(fallbacks),
        fallback_delay_seconds=None
        if fallback_finish is None or first_run is None
        else max(0.0, fallback_finish - first_run),
        sold_out_wait_seconds=percentile([float(job["pending_seconds"]) for job in sold_out], 0.5),
    )


def _completed(job: Mapping[str, Any]) -> bool:
    return bool(job["outcome"] == "completed" and job["run_seconds"] is not None)


def _median_cost(jobs: Sequence[Mapping[str, Any]]) -> float | None:
    return percentile(
        [float(job["estimated_cost_usd"]) for job in jobs if job.get("estimated_cost_usd") is not None], 0.5
    )


def demand(group: Sequence[Mapping[str, Any]], timeline: Timeline) -> Demand:
    ordered = sorted(group, key=lambda entry: counterfactual.created(entry) or 0.0)
    region, first = ordered[0].get("region"), counterfactual.listed(ordered[0])[0]
    starts = [counterfactual.created(entry) or 0.0 for entry in ordered]
    days = max(1.0, (starts[-1] - starts[0]) / DAY + 1.0)
    by_hour: defaultdict[int, float] = defaultdict(float)
    first_runs: list[float] = []
    finishes: list[tuple[float, bool]] = []
    for entry, start in zip(ordered, starts, strict=True):
        completed = _completed(entry)
        if completed:
            finishes.append((float(entry["pending_seconds"]) + float(entry["run_seconds"]), True))
        else:
            finishes.append((float(entry["pending_seconds"]) + float(entry.get("run_seconds") or 0.0), False))
        if not completed:
            continue
        moment = dt.datetime.fromtimestamp(start, dt.UTC)
        count = int(entry.get("selected_instance_count") or 0)
        by_hour[moment.weekday() * 24 + moment.hour] += count * float(entry["run_seconds"]) / 3600.0
        if entry.get("selected_rank") == 0:
            first_runs.append(float(entry["run_seconds"]))
    sold_out = [entry for entry in ordered if was_sold_out(entry)]
    had_room = [finish for entry, finish in zip(ordered, finishes, strict=True) if not was_sold_out(entry)]
    first_run = percentile(first_runs, 0.5)
    by_task: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for entry in ordered:
        by_task[counterfactual.task_of(entry)].append(entry)
    return Demand(
        region=region,
        first_choice=first,
        tasks=tuple(sorted(by_task)),
        task_keys=tuple(sorted({(str(entry["dag_id"]), str(entry["task_id"])) for entry in ordered})),
        jobs=len(ordered),
        sold_out=len(sold_out),
        jobs_per_day=len(ordered) / days,
        instance_hours_by_hour_of_week={hour: round(hours, 3) for hour, hours in sorted(by_hour.items())},
        first_run_seconds=tuple(first_runs),
        finishes=tuple(finishes),
        had_room_finishes=tuple(had_room),
        first_choice_waits=_first_choice_waits(ordered, sold_out, timeline),
        task_costs=tuple(task_costs(jobs, first_run) for _, jobs in sorted(by_task.items())),
    )


def _first_choice_waits(
    ordered: Sequence[Mapping[str, Any]], sold_out: Sequence[Mapping[str, Any]], timeline: Timeline
) -> tuple[tuple[float, bool], ...]:
    """On each sold-out job, how long the first choice alone would have waited: the counterfactual's points
    for the jobs that fell back; the job's own wait where it waited for the first choice and got it."""
    fell_back = [entry for entry in sold_out if entry.get("selected_rank") != 0]
    points = [(float(entry["pending_seconds"]), True) for entry in sold_out if entry.get("selected_rank") == 0]
    estimate = counterfactual.estimate(ordered, fell_back, timeline) if fell_back else None
    if estimate is None:
        return tuple(points)
    curve = estimate.at_fallbacks.curve
    # The curve's quantiles at evenly spaced shares stand for the fallbacks' nights (one per fallback).
    for index in range(len(fell_back)):
        at = curve.quantile((index + 0.5) / len(fell_back))
        points.append((at, True) if at is not None else (max(curve.longest, 0.0), False))
    return tuple(points)


# -- the options over an offering's window ----------------------------------------------------------------


def _quantiles(points: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    curve = kaplan_meier(points)
    return curve.quantile(0.5), curve.quantile(0.9)


def options(
    found: Demand,
    offering: Offering | None,
    *,
    horizon_days: float,
    value_per_hour: float,
    no_offering: str = NO_OFFERING,
) -> dict[str, Any]:
    """Keep falling back, keep waiting, reserve ``offering``: time to result and expected cost over its window
    (``horizon_days`` without an offering), the break-even share and the verdict, each said in words."""
    days = offering.duration_hours / 24.0 if offering is not None else horizon_days
    jobs = max(1, round(found.jobs_per_day * days))
    share, (low, high) = found.sold_out_share, found.sold_out_interval()
    first, sold_out_night = found.first_choice_cost(), found.sold_out_cost(value_per_hour)
    first_run = percentile(found.first_run_seconds, 0.5)
    keep_list = None
    if first is not None and (sold_out_night is not None or found.sold_out == 0):
        keep_list = jobs * ((1 - share) * first + share * (sold_out_night or 0.0))
    # Waiting for the first choice alone: the nights it had room as they were; the sold-out nights its estimated
    # wait, then its run (unknown without a run on it).
    waiting_points = (
        []
        if first_run is None
        else [*found.had_room_finishes, *((wait + first_run, ended) for wait, ended in found.first_choice_waits)]
    )
    rows = [
        _option("keep the list (fall back)", _quantiles(found.finishes), keep_list),
        _option(
            f"wait for {counterfactual.label(found.first_choice)} alone",
            _quantiles(waiting_points),
            None if first is None else jobs * first,
        ),
    ]
    result: dict[str, Any] = {
        "first_choice": counterfactual.label(found.first_choice),
        "region": found.region,
        "tasks": list(found.tasks),
        "task_keys": [list(key) for key in found.task_keys],
        "evidence_jobs": found.jobs,
        "sold_out_jobs": found.sold_out,
        "sold_out_share": round(share, 3),
        "sold_out_share_90": [round(low, 3), round(high, 3)],
        "jobs_per_day": round(found.jobs_per_day, 2),
        "instance_hours_by_hour_of_week": found.instance_hours_by_hour_of_week,
        "window_days": round(days, 2),
        "jobs_in_window": jobs,
        "first_choice_cost_usd": first,
        "sold_out_night_cost_usd": sold_out_night,
        "options": rows,
    }
    if offering is None:
        result["verdict"], result["in_words"] = "no offering", no_offering
        return result
    fee = offering.usd_fee
    plan_quantiles = _quantiles([(seconds, True) for seconds in found.first_run_seconds])
    rows.append(_option(f"reserve {offering.offering_id}", plan_quantiles, fee))
    result["offering"] = offering.as_dict()
    share_needed = break_even_share(fee / jobs if fee is not None else None, first, sold_out_night)
    result["break_even_share"] = None if share_needed is None else round(share_needed, 3)
    result["verdict"], result["in_words"] = verdict(
        found, share_needed=share_needed, fee=fee, first=first, sold_out_night=sold_out_night
    )
    return result


def _option(label: str, quantiles: tuple[float | None, float | None], cost: float | None) -> dict[str, Any]:
    return {
        "option": label,
        "time_to_result_p50_seconds": quantiles[0],
        "time_to_result_p90_seconds": quantiles[1],
        "expected_cost_usd": None if cost is None else round(cost, 2),
    }


def break_even_share(fee_per_job: float | None, first: float | None, sold_out_night: float | None) -> float | None:
    """The share of sold-out nights above which the plan costs less than the list; None when it cannot be said
    (a cost unknown, or a sold-out night costing no more than the first choice: no share makes a plan pay)."""
    if fee_per_job is None or first is None or sold_out_night is None or sold_out_night <= first:
        return None
    return (fee_per_job - first) / (sold_out_night - first)


def verdict(
    found: Demand,
    *,
    share_needed: float | None,
    fee: float | None,
    first: float | None,
    sold_out_night: float | None,
) -> tuple[str, str]:
    """(``reserve`` | ``do not reserve`` | ``cannot tell`` | ``too little evidence`` | ``unknown cost``, words)."""
    name = found.first_choice[0]
    if found.jobs < MIN_JOBS:
        return "too little evidence", f"{found.jobs} job(s) of evidence; at least {MIN_JOBS} are needed to say"
    if fee is None or first is None or sold_out_night is None:
        return "unknown cost", (
            "a price is unknown (the offering's fee in US dollars, or the jobs' costs: `airflow-sm-prefs prices`)"
        )
    if share_needed is None:
        return "do not reserve", (
            f"a night {name} is sold out costs no more than one it has room (the fallback is as cheap), so a plan "
            "pays only for time; give --value-per-hour to price the delay"
        )
    low, high = found.sold_out_interval()
    seen = f"it was sold out on {found.sold_out} of {found.jobs} jobs (90 % interval {low:.0%} to {high:.0%})"
    if share_needed >= 1.0:
        return "do not reserve", f"a plan would not pay even if {name} were sold out every night; {seen}"
    if share_needed <= 0.0:
        return "reserve", f"the plan costs less per job than {name} on demand; {seen}"
    words = f"a plan pays if {name} stays sold out on more than {math.floor(share_needed * 10)} of 10 nights; {seen}"
    if low > share_needed:
        return "reserve", words
    if high < share_needed:
        return "do not reserve", words
    return "cannot tell", words + ", which does not settle it yet"


def advise(
    entries: Iterable[Mapping[str, Any]],
    offerings_of: Any,
    *,
    horizon_days: float = 7.0,
    value_per_hour: float = 0.0,
    tasks: set[str] | None = None,
) -> list[dict[str, Any]]:
    """Every group's options; ``offerings_of(region, configuration, demand)`` gives SageMaker's offerings (the
    caller searches, caches and limits); the cheapest offering is weighed (of equal fees, the soonest to start),
    the others listed."""
    entries = list(entries)
    timeline = Timeline(entries)
    advice = []
    for (_, _), group in sorted(groups(entries).items(), key=lambda item: (str(item[0][0]), item[0][1])):
        if tasks is not None and not tasks & {counterfactual.task_of(entry) for entry in group}:
            continue
        found = demand(group, timeline)
        why = NO_OFFERING
        try:
            offered = sorted(offerings_of(found.region, found.first_choice, found), key=_weighed_first)
        except NoOfferings as reason:
            offered, why = [], str(reason)
        result = options(
            found,
            offered[0] if offered else None,
            horizon_days=horizon_days,
            value_per_hour=value_per_hour,
            no_offering=why,
        )
        result["other_offerings"] = [offering.as_dict() for offering in offered[1:]]
        advice.append(result)
    return advice


def _weighed_first(offering: Offering) -> tuple[bool, float, dt.datetime, str]:
    """The cheapest offering first; among equal fees, the one that starts soonest (the sooner the evidence's
    sold-out nights are covered); unpriced ones last."""
    latest = dt.datetime.max.replace(tzinfo=dt.UTC)
    return offering.usd_fee is None, offering.usd_fee or 0.0, offering.start or latest, offering.offering_id


def render(advice: Sequence[Mapping[str, Any]], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(list(advice), indent=2, default=str)
    from airflow_sm_prefs.platform.formatting import format_seconds

    def shown(seconds: float | None) -> str:
        return "unknown" if seconds is None else format_seconds(seconds)

    if not advice:
        return "No training jobs in the capacity ledger to advise on."
    lines: list[str] = []
    for group in advice:
        lines.append(
            f"{group['first_choice']} in {group['region'] or 'an unknown Region'} "
            f"({', '.join(group['tasks'])}): {group['verdict']}"
        )
        lines.append(f"  {group['in_words']}")
        lines.append(
            f"  evidence: {group['evidence_jobs']} jobs, {group['jobs_per_day']:g} a day; window "
            f"{group['window_days']:g} days, {group['jobs_in_window']} jobs"
        )
        for row in group["options"]:
            cost = "unknown" if row["expected_cost_usd"] is None else f"${row['expected_cost_usd']:,.2f}"
            lines.append(
                f"  {row['option'][:48]:<48} result p50 {shown(row['time_to_result_p50_seconds']):>10}  "
                f"p90 {shown(row['time_to_result_p90_seconds']):>10}  cost {cost:>12}"
            )
        lines.append("")
    lines.append(
        "Offerings change by the hour and are bought only by `airflow-sm-prefs plans reserve OFFERING_ID "
        "--max-usd N`; a job outside the plan's window or instances runs on demand."
    )
    return "\n".join(lines)
