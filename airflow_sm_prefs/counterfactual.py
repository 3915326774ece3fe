"""Had the list held its first choice alone, when would a job that fell back have started?

It is never observed, but the ledger holds evidence, per account and Region and per configuration (type and
count), from every job that listed it at any rank:

- a job that got the configuration after waiting ``w`` saw it become free ``w`` after it was created;
- a job that got something else (or nothing) after ``w`` saw it busy for ``w``: a right-censored wait, ``> w``.

For a fallback created at ``t``, its own wait is one censored point, and every other job whose wait for the
first choice was going on at ``t`` (or began within ``SAME_TIME_SECONDS`` after it) gives the first choice's
wait counted from ``t``: these are the same times. The estimate is Kaplan-Meier over those points
(``survival.py``).

Where it is biased: the same task's own history from other nights is not the same times. A task gets its first
choice on the nights that type has room and falls back on the nights it has none, so its own first-choice
waits come from the easy nights and understate the wait a fallback avoided. That history is shown (labelled
so) when nothing else exists, but never decides a verdict. Evidence from other jobs at the same times
corrects it. It leans the other way where many jobs compete for one type: a second job asking for the first
choice at the same moment might have waited longer than the one that got it.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_sm_prefs.survival import Curve, kaplan_meier

SAME_TIME_SECONDS = 900.0  # another job's wait that began this soon after a fallback counts as the same time

Configuration = tuple[str, int]
Scope = tuple[str | None, str | None]  # (Region, account)
Basis = Literal["same times", "same-task history"]


def listed(entry: Mapping[str, Any]) -> list[Configuration]:
    """The configurations a job's list held, in order; entries without a type or count are left out."""
    found: list[Configuration] = []
    for preference in entry.get("preferences") or ():
        if not isinstance(preference, Mapping):
            continue
        instance_type, count = preference.get("InstanceType"), preference.get("InstanceCount")
        if isinstance(instance_type, str) and type(count) is int:
            found.append((instance_type, count))
    return found


def first_choice(entry: Mapping[str, Any]) -> Configuration | None:
    configurations = listed(entry)
    return configurations[0] if configurations else None


def task_of(entry: Mapping[str, Any]) -> str:
    return f"{entry['dag_id']}.{entry['task_id']}"


def scope_of(entry: Mapping[str, Any]) -> Scope:
    """(Region, account): jobs of other accounts or Regions draw on other capacity."""
    arn = entry.get("job_arn")
    parts = arn.split(":") if isinstance(arn, str) else []
    account = parts[4] if len(parts) > 4 and parts[4] else None
    return entry.get("region"), account


def created(entry: Mapping[str, Any]) -> float | None:
    created = entry.get("created_at")
    return dt.datetime.fromisoformat(created).timestamp() if isinstance(created, str) else None


@dataclass(frozen=True)
class Spell:
    """One job's wait as it bears on one configuration of its list."""

    start: float  # the job's creation, epoch seconds
    wait: float
    got_it: bool  # the job ended its wait on this configuration (else: it was busy for all of ``wait``)
    task: str
    job: str


class Timeline:
    """Every job's evidence about each configuration it listed, per account and Region, built once per report."""

    def __init__(self, entries: Iterable[Mapping[str, Any]]) -> None:
        spells: dict[tuple[Any, ...], list[Spell]] = defaultdict(list)
        for entry in entries:
            start = created(entry)
            if start is None:
                continue
            rank = entry.get("selected_rank")
            for index, configuration in enumerate(listed(entry)):
                got_it = rank == index and (entry.get("selected_instance_count") == configuration[1])
                spell = Spell(start, float(entry["pending_seconds"]), got_it, task_of(entry), entry["job_name"])
                spells[(scope_of(entry), configuration)].append(spell)
        self._spells = {key: sorted(found, key=lambda s: s.start) for key, found in spells.items()}
        self._starts = {key: [s.start for s in found] for key, found in self._spells.items()}
        self._longest = {key: max(s.wait for s in found) for key, found in self._spells.items()}

    def around(self, entry: Mapping[str, Any], configuration: Configuration) -> list[tuple[float, bool, str]]:
        """What other jobs saw of ``configuration`` from the moment ``entry`` was created: (seconds from then,
        ended there, which task), for each job whose wait was going on then or began soon after."""
        start = created(entry)
        if start is None:
            return []
        return self.seen_from(scope_of(entry), configuration, start, exclude=entry["job_name"])

    def seen_from(
        self, scope: Scope, configuration: Configuration, start: float, exclude: str | None = None
    ) -> list[tuple[float, bool, str]]:
        """(seconds from ``start``, ended there, which task) for every job's wait for ``configuration`` that was
        going on at ``start`` or began within ``SAME_TIME_SECONDS`` after it."""
        key = (scope, configuration)
        if key not in self._spells:
            return []
        spells, starts = self._spells[key], self._starts[key]
        found = []
        last = bisect.bisect_right(starts, start + SAME_TIME_SECONDS)
        first = bisect.bisect_left(starts, start - self._longest[key])
        for spell in spells[first:last]:
            ends = spell.start + spell.wait
            if spell.job == exclude or ends < start:
                continue
            found.append((ends - start, spell.got_it, spell.task))
        return found

    def items(self) -> Iterator[tuple[Scope, Configuration, list[Spell]]]:
        for (scope, configuration), spells in self._spells.items():
            yield scope, configuration, spells


@dataclass(frozen=True)
class FirstChoiceWait:
    """How long the first choice would have taken, at the times this task's jobs fell back."""

    configuration: Configuration
    basis: Basis
    curve: Curve
    limit: float  # the restricted mean counts up to here: the task's pending limit as seen, else the evidence's
    sources: tuple[str, ...]

    @property
    def p50(self) -> float | None:
        return self.curve.quantile(0.5)

    def as_json(self) -> dict[str, Any]:
        return {
            "instance_type": self.configuration[0],
            "instance_count": self.configuration[1],
            "basis": self.basis,
            "p50_seconds": self.p50,
            "p90_seconds": self.curve.quantile(0.9),
            "restricted_mean_seconds": round(self.curve.restricted_mean(self.limit), 1),
            "restricted_to_seconds": self.limit,
            "observed": self.curve.observed,
            "censored": self.curve.censored,
            "longest_seconds": self.curve.longest,
            "sources": list(self.sources),
            "survival": [[at, round(after, 4)] for at, after in self.curve.steps],
        }


def _limit(task_entries: Sequence[Mapping[str, Any]], curve: Curve) -> float:
    """A job that got no capacity waited for the whole pending limit: the longest such wait stands for it."""
    starved = [float(e["pending_seconds"]) for e in task_entries if e["outcome"] == "no_capacity"]
    return max(starved) if starved else curve.longest


@dataclass(frozen=True)
class Estimate:
    at_fallbacks: FirstChoiceWait  # the fallbacks' own waits and every other job's at the same times
    others: int  # how many of its points came from other jobs
    history: FirstChoiceWait | None  # this task's jobs on other nights: biased low, never a verdict

    @property
    def shown(self) -> FirstChoiceWait:
        """What the report shows: the same times when anything else was seen then, else the history."""
        if self.others or self.history is None:
            return self.at_fallbacks
        return self.history


def estimate(
    task_entries: Sequence[Mapping[str, Any]], fallbacks: Sequence[Mapping[str, Any]], timeline: Timeline
) -> Estimate | None:
    """The first choice's wait at the times this task's jobs fell back."""
    configuration = next((c for e in fallbacks if (c := first_choice(e)) is not None), None)
    if configuration is None:
        return None
    own = task_of(fallbacks[0])
    points: list[tuple[float, bool]] = []
    sources = {own}
    others = 0
    for fallback in fallbacks:
        if first_choice(fallback) != configuration:
            continue
        points.append((float(fallback["pending_seconds"]), False))
        for seconds, ended, task in timeline.around(fallback, configuration):
            points.append((seconds, ended))
            sources.add(task)
            others += 1
    curve = kaplan_meier(points)
    at_fallbacks = FirstChoiceWait(
        configuration, "same times", curve, _limit(task_entries, curve), tuple(sorted(sources))
    )
    past = kaplan_meier(
        (float(e["pending_seconds"]), e["selected_rank"] == 0) for e in task_entries if first_choice(e) == configuration
    )
    history = FirstChoiceWait(configuration, "same-task history", past, _limit(task_entries, past), (own,))
    return Estimate(at_fallbacks, others, history if past.observed else None)


def break_even(fallback: Mapping[str, Any], first_choice_run: float | None) -> float | None:
    """How long the first choice would have had to stay unavailable for this fallback to finish sooner: its
    wait + run, less the first choice's run (its whole wait + run when that run is unknown: an upper bound)."""
    if fallback["outcome"] != "completed" or fallback["run_seconds"] is None:
        return None
    finished = float(fallback["pending_seconds"]) + float(fallback["run_seconds"])
    return max(0.0, finished - (first_choice_run or 0.0))
