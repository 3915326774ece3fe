"""The Kaplan-Meier estimate of a wait from right-censored observations.

A job that got a configuration after waiting ``w`` observed its wait; a job that fell back (or gave up) after
``w`` only says the wait was longer than ``w``. Kaplan-Meier uses both without treating the second kind as
either an end or a loss. Written here (about fifty lines) rather than taken from lifelines, which needs
pandas < 3 and brings far more than the report uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Curve:
    """S(t), the share still waiting after t seconds, as a step function that drops at each observed end."""

    steps: tuple[tuple[float, float], ...]  # (an observed end, S just after it), in time order
    observed: int
    censored: int
    longest: float  # the longest time any observation covers: past it the curve says nothing

    def survival(self, seconds: float) -> float:
        remaining = 1.0
        for at, after in self.steps:
            if at > seconds:
                break
            remaining = after
        return remaining

    def quantile(self, share: float) -> float | None:
        """The first time by which ``share`` of waits had ended; None when the evidence never gets there."""
        for at, after in self.steps:
            if after <= 1.0 - share + 1e-12:
                return at
        return None

    def restricted_mean(self, limit: float) -> float:
        """The mean wait counted up to ``limit`` (the area under S from 0 to ``limit``)."""
        area, since, remaining = 0.0, 0.0, 1.0
        for at, after in self.steps:
            if at >= limit:
                break
            area += remaining * (at - since)
            since, remaining = at, after
        return area + remaining * max(0.0, limit - since)


def kaplan_meier(points: Iterable[tuple[float, bool]]) -> Curve:
    """The estimate from (seconds, observed) pairs; ``observed`` False is a right-censored point.

    At a tie, ends count before censorings, as is customary: a job censored at t was still waiting at t.
    """
    ordered = sorted(points)  # the points of one moment are taken together below, ends first
    at_risk = len(ordered)
    remaining = 1.0
    steps: list[tuple[float, float]] = []
    index = 0
    observed = 0
    while index < len(ordered):
        moment = ordered[index][0]
        ended = censored = 0
        while index < len(ordered) and ordered[index][0] == moment:
            ended += ordered[index][1]
            censored += not ordered[index][1]
            index += 1
        if ended:
            remaining *= 1.0 - ended / at_risk
            steps.append((moment, remaining))
            observed += ended
        at_risk -= ended + censored
    longest = max((seconds for seconds, _ in ordered), default=0.0)
    return Curve(tuple(steps), observed, len(ordered) - observed, longest)
