"""The advisor: what the task's current list, and lists made from it, would have given on the task's own nights.

Each night the task ran is replayed for each candidate list. For every configuration a candidate names, the
night's evidence is what jobs saw of it from the moment the task's job was created (``counterfactual.py``):
the earliest moment a job got it, and how long jobs saw it busy. A candidate's wait that night is the first of
its entries to become free; an entry seen only busy, for less time than that, might have freed sooner, so the
prediction takes the entry that was seen free (an upper bound), and a night where no entry was seen free is a
wait longer than its entries were seen busy (right-censored). Time to result adds the chosen configuration's
median run on this task; the prediction over nights is Kaplan-Meier (``survival.py``), the cost the median of
the task's own costs per configuration.

Candidates are the current list, the first choice alone, each entry moved to the front, and the list without
an entry that was never chosen or that failed on its hardware (``failure_cause.py``: a failure of the request,
the code or the service says nothing of the configuration, and never proposes dropping it). They only reorder
or drop entries the task already lists, so each keeps within the task's ``requires=`` and its certified
configurations. Other counts of a type are not proposed: the ledger holds no run time for a count the task never
ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.analysis import counterfactual
from airflow_sm_prefs.analysis.counterfactual import Configuration, Timeline
from airflow_sm_prefs.analysis.report import percentile
from airflow_sm_prefs.analysis.survival import kaplan_meier
from airflow_sm_prefs.facts import failure_cause

MIN_NIGHTS = 3


@dataclass(frozen=True)
class Candidate:
    label: str
    configurations: tuple[Configuration, ...]


def candidates(current: Sequence[Configuration], history: Sequence[Mapping[str, Any]]) -> list[Candidate]:
    found = [Candidate("the current list", tuple(current))]
    if len(current) > 1:
        found.append(Candidate("the first choice alone", (current[0],)))
    for index in range(1, len(current)):
        moved = (current[index], *current[:index], *current[index + 1 :])
        found.append(Candidate(f"#{index + 1} ({counterfactual.label(current[index])}) first", moved))
    placed = [e for e in history if e["selected_rank"] is not None]
    causes = failure_cause.causes(history)
    for index, configuration in enumerate(current):
        if len(current) == 1:
            break
        mine = [e for e in placed if _chosen(e) == configuration]
        failed = sum(causes.get(e["job_name"]) == "hardware" for e in mine)
        rest = tuple(c for c in current if c != configuration)
        if failed:
            found.append(Candidate(f"without #{index + 1} (failed on its hardware in {failed} of {len(mine)})", rest))
        elif not mine and len(placed) >= MIN_NIGHTS and index > 0:
            found.append(Candidate(f"without #{index + 1} (never chosen in {len(placed)} jobs)", rest))
    return found


def _chosen(entry: Mapping[str, Any]) -> Configuration | None:
    if entry["selected_instance_type"] is None or entry["selected_instance_count"] is None:
        return None
    return entry["selected_instance_type"], int(entry["selected_instance_count"])


def _night_wait(
    configurations: Sequence[Configuration], seen: Mapping[Configuration, counterfactual.Seen]
) -> tuple[float, bool, Configuration | None] | None:
    """(wait, seen, the configuration it would have got) for one night; ``seen`` False: longer than ``wait``.
    None when a configuration that could have taken the job first was seen by no job that night: SageMaker
    might have placed it there at once, so the night says nothing of this list (never a figure borrowed from
    the configuration that was seen)."""
    free_at = {c: seen[c].free_after for c in configurations if c in seen and seen[c].free_after is not None}
    if free_at:
        # The entry seen free first; an earlier-ranked one free at the same moment wins, as SageMaker picks.
        soonest = min(value for value in free_at.values() if value is not None)
        chosen = next(c for c in configurations if free_at.get(c) == soonest)
        ahead = configurations[: configurations.index(chosen)]
    else:
        chosen, ahead = None, configurations
    if not all(_observed(seen, c) for c in ahead):
        return None
    if chosen is not None:
        return soonest, True, chosen
    return max((seen[c].busy_for or 0.0 for c in configurations), default=0.0), False, None


def _observed(seen: Mapping[Configuration, counterfactual.Seen], configuration: Configuration) -> bool:
    """Whether any job saw ``configuration`` that night, free or busy."""
    found = seen.get(configuration)
    return found is not None and (found.free_after is not None or found.busy_for is not None)


def _seen_on(
    nights: Sequence[Mapping[str, Any]], configurations: set[Configuration], timeline: Timeline
) -> list[dict[Configuration, counterfactual.Seen]]:
    """For each night, what jobs saw of each configuration from the moment the night's job was created."""
    seen: list[dict[Configuration, counterfactual.Seen]] = [{} for _ in nights]
    for configuration in configurations:
        for index, found in enumerate(timeline.seen_by(nights, configuration)):
            if found is not None:
                seen[index][configuration] = found
    return seen


def advise(history: Sequence[Mapping[str, Any]], timeline: Timeline | None = None) -> dict[str, Any]:
    """The task's candidates, each with its predicted time to result and cost over the task's nights."""
    ordered = sorted(history, key=lambda e: e["created_at"] or "")
    current = counterfactual.listed(ordered[-1]) if ordered else []
    if not current:
        return {"current": [], "nights": 0, "candidates": [], "note": "the task's latest job lists no configuration"}
    timeline = timeline or Timeline(history)
    runs: dict[Configuration, list[float]] = {}
    costs: dict[Configuration, list[float]] = {}
    for entry in history:
        chosen = _chosen(entry)
        if chosen is None or entry["outcome"] != "completed":
            continue
        if entry["run_seconds"] is not None:
            runs.setdefault(chosen, []).append(float(entry["run_seconds"]))
        if entry.get("estimated_cost_usd") is not None:
            costs.setdefault(chosen, []).append(float(entry["estimated_cost_usd"]))
    run_p50 = {c: percentile(values, 0.5) for c, values in runs.items()}
    cost_p50 = {c: percentile(values, 0.5) for c, values in costs.items()}
    nights = [e for e in ordered if counterfactual.created(e) is not None]
    proposed = candidates(current, history)
    seen = _seen_on(nights, {c for candidate in proposed for c in candidate.configurations}, timeline)
    results = []
    for candidate in proposed:
        points: list[tuple[float, bool]] = []
        spent: list[float] = []
        unknown_run = unknown_night = 0
        for night_seen in seen:
            replayed = _night_wait(candidate.configurations, night_seen)
            if replayed is None:
                unknown_night += 1
                continue
            wait, was_seen, chosen = replayed
            if not was_seen:
                points.append((wait, False))
                continue
            assert chosen is not None
            run = run_p50.get(chosen)
            if run is None:
                unknown_run += 1
                continue
            points.append((wait + run, True))
            if cost_p50.get(chosen) is not None:
                spent.append(float(cost_p50[chosen]))  # type: ignore[arg-type]
        curve = kaplan_meier(points)
        results.append(
            {
                "candidate": candidate.label,
                "preferences": [{"instance_type": t, "instance_count": n} for t, n in candidate.configurations],
                "time_to_result_p50_seconds": curve.quantile(0.5),
                "time_to_result_p90_seconds": curve.quantile(0.9),
                "estimated_cost_usd_p50": percentile(spent, 0.5),
                "nights": len(nights),
                "nights_with_a_result": curve.observed,
                "nights_waiting_past_the_evidence": curve.censored,
                "nights_without_a_run_time": unknown_run,
                "nights_without_evidence": unknown_night,
                "never_seen": [
                    f"{n} x {t}"
                    for t, n in candidate.configurations
                    if not any(_observed(night, (t, n)) for night in seen)
                ],
            }
        )
    for row in results:
        row["better_than_current"] = row is not results[0] and _better(row, results[0])
    return {
        "current": [{"instance_type": t, "instance_count": n} for t, n in current],
        "nights": len(nights),
        "candidates": results,
    }


def _better(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Sooner at the median or the 90th percentile and later at neither; or as soon and cheaper."""
    keys = ("time_to_result_p50_seconds", "time_to_result_p90_seconds")
    if any(candidate[k] is None or current[k] is None for k in keys):
        return False
    mine, theirs = [candidate[k] for k in keys], [current[k] for k in keys]
    if all(a <= b for a, b in zip(mine, theirs, strict=True)) and mine != theirs:
        return True
    cheaper = candidate["estimated_cost_usd_p50"], current["estimated_cost_usd_p50"]
    return mine == theirs and None not in cheaper and cheaper[0] < cheaper[1]


def render(advice: dict[str, Any], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(advice, indent=2)
    from airflow_sm_prefs.platform.formatting import format_seconds

    def shown(seconds: float | None) -> str:
        return "unknown" if seconds is None else format_seconds(seconds)

    if not advice["candidates"]:
        return f"No advice: {advice.get('note', 'no history')}."
    header = f"{'candidate':<52} {'result p50':>10} {'p90':>10} {'cost p50':>10}  {'':<6}  evidence"
    lines = [header, "-" * len(header)]
    for row in advice["candidates"]:
        cost = "unknown" if row["estimated_cost_usd_p50"] is None else f"${row['estimated_cost_usd_p50']:,.2f}"
        evidence = (
            f"{row['nights_with_a_result']} of {row['nights']} nights replayed with a result, "
            f"{row['nights_waiting_past_the_evidence']} waiting past the evidence"
        )
        if row["nights_without_a_run_time"]:
            evidence += f", {row['nights_without_a_run_time']} with no run time known"
        if row["nights_without_evidence"]:
            never = f" (no job ever saw {', '.join(row['never_seen'])})" if row["never_seen"] else ""
            evidence += f", {row['nights_without_evidence']} not replayable{never}"
        lines.append(
            f"{row['candidate'][:52]:<52} {shown(row['time_to_result_p50_seconds']):>10} "
            f"{shown(row['time_to_result_p90_seconds']):>10} {cost:>10}  "
            f"{'better' if row['better_than_current'] else '':<6}  {evidence}"
        )
    return "\n".join(lines)
