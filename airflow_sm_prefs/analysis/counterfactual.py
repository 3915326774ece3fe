"""Had the list held its first choice alone, when would a job that fell back have started?

It is never observed, but the ledger holds evidence, per account and Region and per configuration (type and
count), from every job that listed it at any rank:

- a job that got the configuration after waiting ``w`` saw it become free ``w`` after it was created;
- a job that got something else (or nothing) after ``w`` saw it busy for ``w``: a right-censored wait, ``> w``.

For a fallback created at ``t``, the jobs that count are those whose wait for the first choice was going on
at ``t`` or began within ``SAME_TIME_SECONDS`` after it: the same times. They give the fallback one point,
its first-choice wait counted from ``t``: the first moment one of them got it (if no sooner than the
fallback's own wait, for the fallback itself saw it busy that long), else a censored wait as long as any of
them saw it busy, at least its own. The estimate is Kaplan-Meier over the task's fallbacks (``survival.py``).
One point per fallback, so a night that many jobs watched counts once.

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
import heapq
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, NamedTuple

from airflow_sm_prefs.analysis.survival import Curve, kaplan_meier

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


def label(configuration: Configuration) -> str:
    return f"{configuration[1]} x {configuration[0]}"


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


class ListedJob(NamedTuple):
    """A job's list, account and Region, and creation: a tuple, as 100,000 of them are made per report."""

    listed: tuple[Configuration, ...]
    scope: Scope
    created: float | None

    @property
    def first_choice(self) -> Configuration | None:
        return self.listed[0] if self.listed else None


class Spell(NamedTuple):
    """One job's wait as it bears on one configuration of its list (a tuple: one per job and entry)."""

    start: float  # the job's creation, epoch seconds
    wait: float
    got_it: bool  # the job ended its wait on this configuration (else: it was busy for all of ``wait``)
    task: str


class Timeline:
    """Every job's evidence about each configuration it listed, per account and Region, built once per report."""

    def __init__(self, entries: Iterable[Mapping[str, Any]]) -> None:
        spells: dict[tuple[Any, ...], list[Spell]] = defaultdict(list)
        self._jobs: dict[tuple[str, Any], ListedJob] = {}
        self._shared: dict[Any, Any] = {}
        self._listed: dict[int, tuple[Any, tuple[Configuration, ...]]] = {}
        for entry in entries:
            facts = self.listed_job(entry)
            if facts.created is None:
                continue
            rank = entry.get("selected_rank")
            task = self._shared.setdefault(task_of(entry), task_of(entry))
            wait = float(entry["pending_seconds"])
            for index, configuration in enumerate(facts.listed):
                if rank is not None and index > rank and wait <= 0:
                    # Taken at once by an entry ahead of it: SageMaker never looked at this one (no evidence,
                    # not "busy for 0 s", which would let a replay borrow another configuration's nights).
                    continue
                got_it = rank == index and (entry.get("selected_instance_count") == configuration[1])
                spells[(facts.scope, configuration)].append(Spell(facts.created, wait, got_it, task))
        # By start only (a stable sort keeps the ledger's order among jobs that began together).
        self._spells = {key: sorted(found, key=itemgetter(0)) for key, found in spells.items()}
        self._starts = {key: [s.start for s in found] for key, found in self._spells.items()}
        self._longest = {key: max(s.wait for s in found) for key, found in self._spells.items()}
        self._seen: dict[tuple[Scope, Configuration, float], Seen] = {}

    def listed_job(self, entry: Mapping[str, Any]) -> ListedJob:
        """The job's list, account and Region, and creation, read once per job (lists and scopes shared)."""
        # SageMaker's names are unique per account and Region only: a namesake in another Region is another job.
        key = (entry["job_name"], entry.get("region"))
        found = self._jobs.get(key)
        if found is None:
            preferences = entry.get("preferences")
            # The ledger's reader hands one list object to every job that carried the same list.
            known = self._listed.get(id(preferences))
            if known is not None and known[0] is preferences:
                configurations = known[1]
            else:
                configurations = tuple(listed(entry))
                self._listed[id(preferences)] = (preferences, configurations)
            scope = scope_of(entry)
            found = self._jobs[key] = ListedJob(
                self._shared.setdefault(configurations, configurations),
                self._shared.setdefault(scope, scope),
                created(entry),
            )
        return found

    def seen_from(self, scope: Scope, configuration: Configuration, starts: Sequence[float]) -> list[Seen]:
        """What every job saw of ``configuration`` from each of ``starts``: the first moment one got it, and the
        longest one saw it busy, among the jobs whose wait was going on then or began within
        ``SAME_TIME_SECONDS`` after. Answers are kept: ``prefetch`` every start first and one sweep answers all."""
        self.prefetch(scope, configuration, starts)
        return [self._seen[(scope, configuration, start)] for start in starts]

    def seen_by(self, entries: Sequence[Mapping[str, Any]], configuration: Configuration) -> list[Seen | None]:
        """What jobs saw of ``configuration`` from each entry's creation, in each entry's account and Region
        (None for an entry with no creation time)."""
        by_scope: dict[Scope, list[int]] = defaultdict(list)
        for index, entry in enumerate(entries):
            facts = self.listed_job(entry)
            if facts.created is not None:
                by_scope[facts.scope].append(index)
        found: list[Seen | None] = [None] * len(entries)
        for scope, indexes in by_scope.items():
            starts = [self.listed_job(entries[i]).created or 0.0 for i in indexes]
            for index, seen in zip(indexes, self.seen_from(scope, configuration, starts), strict=True):
                found[index] = seen
        return found

    def prefetch(self, scope: Scope, configuration: Configuration, starts: Iterable[float]) -> None:
        """Answer these starts in one sweep over the jobs: O((jobs + starts) log jobs)."""
        key = (scope, configuration)
        asked = sorted({start for start in starts if (scope, configuration, start) not in self._seen})
        if not asked:
            return
        spells = self._spells.get(key, [])
        # A job that began more than the longest wait before the first start cannot reach it.
        taken = bisect.bisect_left(self._starts.get(key, []), asked[0] - self._longest.get(key, 0.0))
        freed: list[tuple[float, str]] = []  # (when, whose) of the jobs that got it: a heap, earliest first
        busiest: tuple[float, str] | None = None  # the latest end of a wait that did not get it
        for start in asked:
            while taken < len(spells) and spells[taken].start <= start + SAME_TIME_SECONDS:
                spell = spells[taken]
                ends = spell.start + spell.wait
                if spell.got_it:
                    heapq.heappush(freed, (ends, spell.task))
                elif busiest is None or ends > busiest[0]:
                    busiest = (ends, spell.task)
                taken += 1
            while freed and freed[0][0] < start:  # freed before this start: before every later one too
                heapq.heappop(freed)
            free = freed[0] if freed else None
            busy = busiest if busiest is not None and busiest[0] >= start else None
            self._seen[(scope, configuration, start)] = Seen(
                free[0] - start if free else None,
                free[1] if free else None,
                busy[0] - start if busy else None,
                busy[1] if busy else None,
            )

    def items(self) -> Iterator[tuple[Scope, Configuration, list[Spell]]]:
        for (scope, configuration), spells in self._spells.items():
            yield scope, configuration, spells


@dataclass(frozen=True, slots=True)
class Seen:
    """What jobs saw of one configuration from one moment on."""

    free_after: float | None = None  # the first moment a job got it, in seconds from then
    freed_for: str | None = None  # that job's task
    busy_for: float | None = None  # the longest a job that did not get it saw it busy, from then
    busy_task: str | None = None

    def wait(self, own_busy: float) -> tuple[float, bool, str | None]:
        """(seconds, seen free, whose evidence) for a job that itself saw it busy for ``own_busy``: seen free
        when a job got it no sooner than that; else busy for as long as anyone saw it busy."""
        if self.free_after is not None and self.free_after >= own_busy:
            return self.free_after, True, self.freed_for
        if self.busy_for is not None and self.busy_for > own_busy:
            return self.busy_for, False, self.busy_task
        return own_busy, False, None


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


def fallback_queries(
    fallbacks: Iterable[Mapping[str, Any]], timeline: Timeline
) -> dict[tuple[Scope, Configuration], list[float]]:
    """The starts whose first-choice evidence a report will ask for, by account, Region and first choice."""
    queries: dict[tuple[Scope, Configuration], list[float]] = defaultdict(list)
    for fallback in fallbacks:
        facts = timeline.listed_job(fallback)
        if facts.first_choice is not None and facts.created is not None:
            queries[(facts.scope, facts.first_choice)].append(facts.created)
    return queries


def estimate(
    task_entries: Sequence[Mapping[str, Any]], fallbacks: Sequence[Mapping[str, Any]], timeline: Timeline
) -> Estimate | None:
    """The first choice's wait at the times this task's jobs fell back."""
    configuration = next((c for e in fallbacks if (c := timeline.listed_job(e).first_choice) is not None), None)
    if configuration is None:
        return None
    own = task_of(fallbacks[0])
    points: list[tuple[float, bool]] = []
    sources = {own}
    others = 0
    mine = [e for e in fallbacks if timeline.listed_job(e).first_choice == configuration]
    for fallback, seen in zip(mine, timeline.seen_by(mine, configuration), strict=True):
        if seen is None:
            continue
        seconds, ended, whose = seen.wait(float(fallback["pending_seconds"]))
        points.append((seconds, ended))
        if whose is not None:
            sources.add(whose)
            others += 1
    curve = kaplan_meier(points)
    at_fallbacks = FirstChoiceWait(
        configuration, "same times", curve, _limit(task_entries, curve), tuple(sorted(sources))
    )
    past = kaplan_meier(
        (float(e["pending_seconds"]), e["selected_rank"] == 0)
        for e in task_entries
        if timeline.listed_job(e).first_choice == configuration
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
