"""The capacity report: for each pipeline task, whether letting SageMaker pick a configuration paid off.

Built from the capacity ledger (``ledger_reading``). A fallback pays off when it finished sooner than waiting for
the first choice would have, which is never observed: ``counterfactual.py`` estimates the first choice's wait
at the times the fallbacks happened, from every job in the ledger that listed it then. The verdict rules, in
order (the same in ``docs/report.md``):

1. ``not_enough_data``: fewer than ``MIN_JOBS`` jobs got capacity in the window.
2. ``incompatible_fallback``: a fallback configuration failed on its hardware (``failure_cause.py``: a CUDA,
   NCCL, driver or GPU-memory failure, or one the same task instance then completed without) in a larger share
   of its jobs than the first choice did (and at least once): the list hides a configuration the workload
   cannot use. A failure of the request itself (a missing bucket, a permission), of the code or of the service
   says nothing of the configuration that ran it: it is counted apart and never decides this rule.
3. ``not_enough_data``: no job fell back, so the list has not been put to the test.
4. ``did_not_pay_off``: no job that fell back completed.
5. The break-even wait: for each completed fallback, its wait + run less the first choice's median run on
   this task (less nothing when no first-choice run is known, an upper bound); the task's is their median.
   Against the first choice's estimated wait at the fallbacks' times (Kaplan-Meier, ``survival.py``):
   a median wait above the break-even goes on to rule 6; at or below it, ``did_not_pay_off`` (waiting would
   have finished sooner); no median but evidence that the first choice stayed busy past the break-even in
   most fallbacks goes on to rule 6; otherwise ``not_enough_data``, and the reason states the break-even wait
   and the evidence that would decide it. The task's own first-choice waits on other nights never decide:
   they come from the nights the first choice had room.
6. ``did_not_pay_off`` when the fallbacks' median estimated cost per job exceeds the first choice's by more
   than ``max_cost_premium`` (default 25%); else ``paid_off``.

Costs come from the price table (``prices.py``). When either side has no known cost (no price, or
plan-backed), rule 6 is skipped and the reason says the cost was not judged.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.analysis import counterfactual
from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry
from airflow_sm_prefs.facts import failure_cause
from airflow_sm_prefs.facts.failure_cause import FailureCause

MIN_JOBS = 3
MAX_COST_PREMIUM = 0.25
DRIFT_TOLERANCE = 0.25  # how far a configuration's median run may stray from its certified run time


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _time_to_result(entry: LedgerEntry) -> float | None:
    if entry["outcome"] != "completed" or entry["run_seconds"] is None:
        return None
    return float(entry["pending_seconds"]) + float(entry["run_seconds"])


Causes = dict[str, FailureCause | None]  # each job's failure cause by name (``failure_cause.causes``)


def _hardware_failures(entries: list[LedgerEntry], causes: Causes) -> int:
    return sum(causes.get(e["job_name"]) == "hardware" for e in entries)


def _hardware_share(entries: list[LedgerEntry], causes: Causes) -> float:
    return _hardware_failures(entries, causes) / len(entries) if entries else 0.0


def _failures_by_cause(entries: list[LedgerEntry], causes: Causes) -> dict[str, int]:
    counted = Counter(cause for e in entries if (cause := causes.get(e["job_name"])) is not None)
    return {cause: counted[cause] for cause in failure_cause.CAUSES if counted[cause]}


def jobs(count: int, noun: str = "job") -> str:
    """``1 job``, ``2 jobs``: a count with its noun."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def preference_label(rank: int | None) -> str:
    """A rank as every format shows it: ``#1`` for the first choice (SageMaker's ranks start at 0)."""
    return "-" if rank is None else f"#{rank + 1}"


def _configuration_key(entry: LedgerEntry) -> tuple[Any, ...]:
    return (entry["selected_rank"], entry["selected_instance_type"], entry["selected_instance_count"])


def _configuration_label(entry: LedgerEntry) -> str:
    rank = preference_label(entry["selected_rank"])
    return f"{entry['selected_instance_count']} x {entry['selected_instance_type']} ({rank})"


def median_text(seconds: float | None) -> str:
    from airflow_sm_prefs.platform.formatting import format_seconds

    return "unknown" if seconds is None else format_seconds(seconds)


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)  # the ledger checked it is an aware ISO 8601 time


def created_since(entry: LedgerEntry, since: dt.datetime | None) -> bool:
    """Whether the job was created at or after ``since`` (every job, without a ``since``)."""
    return since is None or (entry["created_at"] is not None and _time(entry["created_at"]) >= since)


def in_scope(entry: LedgerEntry, since: dt.datetime | None, dag_id: str | None, task_id: str | None) -> bool:
    """Whether the report's filters (``--since``, ``--dag-id``, ``--task-id``) keep ``entry``."""
    return (
        (dag_id is None or entry["dag_id"] == dag_id)
        and (task_id is None or entry["task_id"] == task_id)
        and created_since(entry, since)
    )


def _cost(entry: LedgerEntry) -> float | None:
    cost = entry.get("estimated_cost_usd")
    return None if cost is None else float(cost)


def _cost_check(
    first: list[LedgerEntry], fallbacks: list[LedgerEntry], max_premium: float
) -> tuple[bool, str, float | None]:
    """(within the premium, what to say about the cost, the premium), over jobs that completed."""
    first_cost = percentile([c for e in first if e["outcome"] == "completed" and (c := _cost(e)) is not None], 0.5)
    fallback_cost = percentile(
        [c for e in fallbacks if e["outcome"] == "completed" and (c := _cost(e)) is not None], 0.5
    )
    if first_cost is None or fallback_cost is None:
        return True, "cost not judged (no known price on one side, or plan-backed)", None
    if first_cost == 0:
        return fallback_cost == 0, f"a median ${fallback_cost:,.2f} per job against the first choice's $0.00", None
    premium = fallback_cost / first_cost - 1
    said = f"a median ${fallback_cost:,.2f} per job, {premium:+.0%} against the first choice's ${first_cost:,.2f}"
    return premium <= max_premium, said, premium


@dataclass(frozen=True)
class Judgement:
    label: str
    reason: str
    estimate: counterfactual.Estimate | None = None
    first_choice_run: float | None = None
    break_even: float | None = None  # the task's: the median of its completed fallbacks'
    # What the fallbacks gave, for the lead sentence: how much sooner their results came than waiting would
    # have (negative: later; None: unknown, or at least ``sooner_at_least``), and their cost premium.
    sooner_seconds: float | None = None
    sooner_at_least: float | None = None
    premium: float | None = None


def _first_choice_run(first: list[LedgerEntry]) -> float | None:
    return percentile([float(e["run_seconds"]) for e in first if e["outcome"] == "completed" and e["run_seconds"]], 0.5)


def _break_even(fallbacks: list[LedgerEntry], first_run: float | None) -> float | None:
    return percentile([b for e in fallbacks if (b := counterfactual.break_even(e, first_run)) is not None], 0.5)


def verdict(
    entries: list[LedgerEntry],
    max_cost_premium: float = MAX_COST_PREMIUM,
    timeline: counterfactual.Timeline | None = None,
    causes: Causes | None = None,
) -> Judgement:
    """The task's verdict; ``timeline``: every job the evidence may come from (default: these entries);
    ``causes``: each job's failure cause (default: ``failure_cause.causes`` of these entries)."""
    causes = causes if causes is not None else failure_cause.causes(entries)
    placed = [e for e in entries if e["selected_rank"] is not None]
    if len(placed) < MIN_JOBS:
        return Judgement(
            "not_enough_data", f"{jobs(len(placed))} got capacity in the window; at least {MIN_JOBS} are needed"
        )
    first = [e for e in placed if e["selected_rank"] == 0]
    fallbacks = [e for e in placed if e["selected_rank"]]
    by_configuration: dict[tuple[Any, ...], list[LedgerEntry]] = defaultdict(list)
    for entry in fallbacks:
        by_configuration[_configuration_key(entry)].append(entry)
    first_share = _hardware_share(first, causes)
    for group in sorted(by_configuration.values(), key=lambda g: -_hardware_share(g, causes)):
        failures = _hardware_failures(group, causes)
        if failures and _hardware_share(group, causes) > first_share:
            first_said = (
                f"the first choice in {_hardware_failures(first, causes)} of {len(first)}"
                if first
                else "the first choice never ran in the window"
            )
            return Judgement(
                "incompatible_fallback",
                f"{_configuration_label(group[0])} failed on its hardware in {failures} of {jobs(len(group))}; "
                f"{first_said}",
            )
    if not fallbacks:
        return Judgement("not_enough_data", "no job fell back in the window: the list has not been put to the test")
    first_run = _first_choice_run(first)
    threshold = _break_even(fallbacks, first_run)
    if threshold is None:
        return Judgement("did_not_pay_off", "no job that fell back completed", first_choice_run=first_run)
    estimate = counterfactual.estimate(entries, fallbacks, timeline or counterfactual.Timeline(entries))
    said = _break_even_text(threshold, first_run)
    if estimate is None:
        return Judgement(
            "not_enough_data", f"{said}; the jobs' lists name no first choice with a count", None, first_run, threshold
        )
    wait = estimate.at_fallbacks
    evidence = _evidence_text(wait)
    sooner = None if wait.p50 is None else wait.p50 - threshold
    if sooner is not None and sooner <= 0:
        return Judgement(
            "did_not_pay_off",
            f"waiting would have finished sooner: at the times jobs fell back, the first choice was free after a "
            f"median {median_text(wait.p50)} ({evidence}); {said}",
            estimate,
            first_run,
            threshold,
            sooner_seconds=sooner,
        )
    if wait.p50 is None and wait.curve.longest < threshold:
        history = estimate.history
        hint = (
            f"; this task's own first-choice waits on other nights (median {median_text(history.p50)}) are left "
            "out, for they come from the nights the first choice had room"
            if history is not None and history.p50 is not None
            else ""
        )
        return Judgement(
            "not_enough_data",
            f"{said}; at the times jobs fell back the ledger shows it busy for at most "
            f"{median_text(wait.curve.longest)} ({evidence}): a job listing "
            f"{counterfactual.label(wait.configuration)} then, in another task or DAG of the same account and "
            f"Region, would decide it{hint}",
            estimate,
            first_run,
            threshold,
        )
    longer = (
        f"a median {median_text(wait.p50)}"
        if wait.p50 is not None
        else f"more than {median_text(wait.curve.longest)} in most"
    )
    timing = f"at the times jobs fell back, the first choice would have taken {longer} ({evidence}); {said}"
    affordable, cost, premium = _cost_check(first, fallbacks, max_cost_premium)
    gain = {
        "sooner_seconds": sooner,
        "sooner_at_least": None if sooner is not None else wait.curve.longest - threshold,
        "premium": premium,
    }
    if not affordable:
        return Judgement(
            "did_not_pay_off",
            f"{timing}, but at {cost}: above the {max_cost_premium:.0%} premium allowed",
            estimate,
            first_run,
            threshold,
            **gain,
        )
    return Judgement("paid_off", f"{timing}; {cost}", estimate, first_run, threshold, **gain)


def _break_even_text(threshold: float, first_run: float | None) -> str:
    basis = "" if first_run is not None else " (no first-choice run known, so counting none: an upper bound)"
    return (
        "the fallback pays off if the first choice would have stayed unavailable for more than "
        f"{median_text(threshold)}{basis}"
    )


def _evidence_text(wait: counterfactual.FirstChoiceWait) -> str:
    sources = ", ".join(wait.sources)
    return f"{wait.curve.observed} seen free, {wait.curve.censored} seen busy, from {sources}"


def _utilization(group: list[LedgerEntry]) -> dict[str, Any]:
    """Per metric, the median of the jobs' means and of their p90s (each job's own over its hosts and minutes),
    and how many jobs had their utilization read."""
    from airflow_sm_prefs.facts import utilization

    read = [u for e in group if (u := utilization.from_json(e.get("utilization"))) is not None and u.known]
    medians: dict[str, dict[str, float | None] | None] = {}
    for name in utilization.METRICS:
        figures = [f for u in read if (f := u.figures.get(name)) is not None]
        medians[name] = (
            {"mean": percentile([f.mean for f in figures], 0.5), "p90": percentile([f.p90 for f in figures], 0.5)}
            if figures
            else None
        )
    return {"utilization": medians, "utilization_jobs": len(read)}


def _certified(group: list[LedgerEntry], run_p50: float | None, tolerance: float) -> dict[str, Any]:
    """The configuration's benchmark (the latest recorded) and how its runs compare."""
    benchmarks = [float(seconds) for e in group if (seconds := e.get("certified_run_seconds"))]
    certified = benchmarks[-1] if benchmarks else None
    ratio = round(run_p50 / certified, 3) if run_p50 is not None and certified else None
    return {
        "certified_run_seconds": certified,
        "run_time_vs_certified_p50": ratio,
        "drifted": ratio is not None and abs(ratio - 1) > tolerance,
    }


def _configurations(
    entries: list[LedgerEntry], causes: Causes, drift_tolerance: float, first_run: float | None
) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[LedgerEntry]] = defaultdict(list)
    for entry in entries:
        if entry["selected_instance_type"] is not None:
            groups[_configuration_key(entry)].append(entry)
    rows = []
    for (rank, instance_type, count), group in sorted(groups.items(), key=lambda item: (item[0][0] is None, item[0])):
        runs = [float(e["run_seconds"]) for e in group if e["run_seconds"] is not None]
        results = [t for e in group if (t := _time_to_result(e)) is not None]
        rows.append(
            {
                "instance_type": instance_type,
                "instance_count": count,
                "rank": rank,
                "preference": preference_label(rank),
                "jobs": len(group),
                "run_seconds_p50": percentile(runs, 0.5),
                "run_seconds_p90": percentile(runs, 0.9),
                "time_to_result_seconds_p50": percentile(results, 0.5),
                "estimated_cost_usd_p50": percentile([c for e in group if (c := _cost(e)) is not None], 0.5),
                "plan_backed": any(e["plan_backed"] for e in group),
                "failed_after_start": sum(e["outcome"] == "failed_after_start" for e in group),
                "hardware_failures": _hardware_failures(group, causes),
                "failures_by_cause": _failures_by_cause(group, causes),
                **_utilization(group),
                # How long the first choice would have had to stay busy for these jobs to finish sooner.
                "break_even_wait_seconds": _break_even(group, first_run) if rank else None,
                **_certified(
                    sorted(group, key=lambda e: e["created_at"] or ""), percentile(runs, 0.5), drift_tolerance
                ),
            }
        )
    return rows


def summarize(
    entries: Iterable[LedgerEntry],
    *,
    since: dt.datetime | None = None,
    dag_id: str | None = None,
    task_id: str | None = None,
    max_cost_premium: float = MAX_COST_PREMIUM,
    drift_tolerance: float = DRIFT_TOLERANCE,
) -> list[dict[str, Any]]:
    """One row per (dag_id, task_id), in that order. The filters choose the rows; the evidence about the first
    choice's wait comes from every entry given, whatever the filters."""
    given = list(entries)
    timeline = counterfactual.Timeline(given)
    groups: dict[tuple[str, str], list[LedgerEntry]] = defaultdict(list)
    for entry in given:
        if in_scope(entry, since, dag_id, task_id):
            groups[(entry["dag_id"], entry["task_id"])].append(entry)
    fallbacks = (e for group in groups.values() for e in group if e["selected_rank"])
    for (scope, configuration), starts in counterfactual.fallback_queries(fallbacks, timeline).items():
        timeline.prefetch(scope, configuration, starts)  # one sweep per first choice for every task's fallbacks
    rows = []
    for (dag, task), group in sorted(groups.items()):
        placed = [e for e in group if e["selected_rank"] is not None]
        fell_back = sum(1 for e in placed if e["selected_rank"])
        ranks = sorted(Counter(e["selected_rank"] for e in placed).items())
        outcomes = Counter(e["outcome"] for e in group)
        causes = failure_cause.causes(group)
        judged = verdict(group, max_cost_premium, timeline, causes)
        pending = [float(e["pending_seconds"]) for e in group]
        recurring = len({e["run_id"] for e in group}) > 1
        rows.append(
            {
                "dag_id": dag,
                "task_id": task,
                "job_kind": group[0]["job_kind"],
                "runs": len(group),
                # One DAG run only (a certification run, a one-off backfill): shown apart from the nightly ones.
                "recurring": recurring,
                "summary": lead(
                    group,
                    fell_back=fell_back,
                    placed=len(placed),
                    judged=judged,
                    causes=causes,
                    max_cost_premium=max_cost_premium,
                ),
                "completed": outcomes["completed"],
                "no_capacity": outcomes["no_capacity"],
                "failed_after_start": outcomes["failed_after_start"],
                "stopped": outcomes["stopped"],
                "failures_by_cause": _failures_by_cause(group, causes),
                "fallback_rate": round(fell_back / len(placed), 4) if placed else None,
                "rank_counts": {preference_label(rank): n for rank, n in ranks},
                "pending_seconds_p50": percentile(pending, 0.5),
                "pending_seconds_p90": percentile(pending, 0.9),
                "first_choice_wait": judged.estimate.shown.as_json() if judged.estimate else None,
                "break_even_wait_seconds": judged.break_even,
                "configurations": _configurations(group, causes, drift_tolerance, judged.first_choice_run),
                "verdict": judged.label,
                "reason": judged.reason,
            }
        )
    return rows


# -- the lead sentence -------------------------------------------------------------------------------------------

LEAD_REASON_CHARACTERS = 160  # a failure reason quoted in the lead: enough to name the bucket or the key


def _quoted_reason(group: list[LedgerEntry], causes: Causes, cause: str) -> str:
    latest = max(
        (e for e in group if causes.get(e["job_name"]) == cause and e.get("failure_reason")),
        key=lambda e: e["created_at"] or "",
        default=None,
    )
    if latest is None:
        return ""
    reason = " ".join(str(latest["failure_reason"]).split())
    cut = reason if len(reason) <= LEAD_REASON_CHARACTERS else reason[: LEAD_REASON_CHARACTERS - 3] + "..."
    return f" ({cut})"


def _gain_text(judged: Judgement, max_cost_premium: float) -> str:
    """What falling back gave, in the order a reader weighs it: time, then money."""
    if judged.sooner_seconds is not None and judged.sooner_seconds <= 0:
        time = f"waiting would have given results ~{median_text(-judged.sooner_seconds)} sooner"
    elif judged.sooner_seconds is not None:
        time = f"results ~{median_text(judged.sooner_seconds)} sooner"
    elif judged.sooner_at_least is not None:
        time = f"results more than {median_text(judged.sooner_at_least)} sooner"
    else:
        return ""
    if judged.premium is None:
        return time
    return f"{time}, {judged.premium:+.0%} cost per job (allowed {max_cost_premium:+.0%})"


def lead(
    group: list[LedgerEntry],
    *,
    fell_back: int,
    placed: int,
    judged: Judgement,
    causes: Causes,
    max_cost_premium: float = MAX_COST_PREMIUM,
) -> str:
    """What happened, in plain words, before the verdict: how often the task fell back and what it gave, which
    configuration failed on its hardware, and the failures that say nothing of the hardware."""
    said = f"fell back in {fell_back} of {jobs(placed)}" if placed else f"no job got capacity in {jobs(len(group))}"
    if judged.label == "incompatible_fallback":
        said += f": {judged.reason.split(';')[0]}"
    elif fell_back and (gain := _gain_text(judged, max_cost_premium)):
        said += f": {gain}"
    apart = []
    for cause, words in (
        # A hardware failure the verdict did not already name (on the first choice, or a one-off task's).
        ("hardware", "on its hardware"),
        ("configuration", "on the request itself"),
        ("code", "in the code"),
        ("service", "in SageMaker itself"),
        ("unknown", "for no known reason"),
    ):
        count = sum(causes.get(e["job_name"]) == cause for e in group)
        if count and not (cause == "hardware" and judged.label == "incompatible_fallback"):
            apart.append(f"{jobs(count)} failed {words}{_quoted_reason(group, causes, cause)}")
    no_capacity = sum(e["outcome"] == "no_capacity" for e in group)
    if no_capacity:
        apart.insert(0, f"{jobs(no_capacity)} got no capacity")
    return "; ".join([said, *apart])
