"""The cost caps: entries whose on-demand price, for the instances asked and the longest run allowed, is above
``max_hourly_cost_usd`` or ``max_cost_usd``; an entry that has no price cannot be checked and is objected to,
and an entry backed by a training plan is paid for by the plan and never is."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.preflight.check import Arguments, EntryCheck, Run
from airflow_sm_prefs.preflight.entries import entries, max_runtime_seconds
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError, is_templated

if TYPE_CHECKING:
    from airflow_sm_prefs.reference.prices import PriceTable


@dataclass(frozen=True)
class CostCaps:
    """The task's caps in US dollars (``max_hourly_cost_usd``, ``max_cost_usd``), as judged with its arguments."""

    max_hourly_cost_usd: float | None = None
    max_cost_usd: float | None = None

    @property
    def any(self) -> bool:
        return self.max_hourly_cost_usd is not None or self.max_cost_usd is not None


def cost_violations(
    kind: JobKind, request: Mapping[str, Any], caps: CostCaps, *, table: PriceTable, region: str | None
) -> dict[int, str]:
    """Entries above a cost cap, or that cannot be checked against one for want of a price."""
    found: dict[int, str] = {}
    if not caps.any:
        return found
    runtime = max_runtime_seconds(request)
    for entry in entries(kind, request):
        if entry.plan_backed:
            continue  # paid for by the training plan, not on demand
        price = table.hourly(region, kind.name, entry.instance_type)
        if price is None:
            found[entry.rank] = (
                f"{entry.label}: no on-demand price for {entry.instance_type} ({kind.name}) in {region} in the price "
                "table, so its cost cannot be checked against the cap; run `airflow-sm-prefs prices refresh` or add "
                "it to your table ([sm_prefs] price_table)"
            )
            continue
        hourly = price.usd * entry.count
        if caps.max_hourly_cost_usd is not None and hourly > caps.max_hourly_cost_usd:
            found[entry.rank] = (
                f"{entry.label}: costs ${hourly:,.2f} an hour (${price.usd:,.4g} x {entry.count}), above "
                f"max_hourly_cost_usd=${caps.max_hourly_cost_usd:,.2f}"
            )
        elif caps.max_cost_usd is not None and hourly * runtime / 3600 > caps.max_cost_usd:
            found[entry.rank] = (
                f"{entry.label}: may cost ${hourly * runtime / 3600:,.2f} (${hourly:,.2f} an hour for "
                f"MaxRuntimeInSeconds={runtime}), above max_cost_usd=${caps.max_cost_usd:,.2f}"
            )
    return found


@dataclass(frozen=True)
class WithinCostCaps(EntryCheck):
    """Entries above ``max_hourly_cost_usd`` or ``max_cost_usd`` at the price table's on-demand prices."""

    arguments = ("max_hourly_cost_usd", "max_cost_usd")
    templated = ("max_hourly_cost_usd", "max_cost_usd")

    caps: CostCaps

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> WithinCostCaps | None:
        problems: list[str] = []
        hourly = _limit(given.get("max_hourly_cost_usd"), "max_hourly_cost_usd", problems)
        worst = _limit(given.get("max_cost_usd"), "max_cost_usd", problems)
        if problems:
            raise RequestValidationError(problems)
        caps = CostCaps(hourly, worst)  # a templated cap is judged again once rendered, before the run
        return cls(caps) if caps.any else None

    def violations(self, run: Run, request: Mapping[str, Any]) -> dict[int, str]:
        # The price table is read only when a cap is set: it may be on object storage.
        from airflow_sm_prefs.reference import prices

        return cost_violations(run.kind, request, self.caps, table=prices.current(), region=run.account.region)


def _limit(value: Any, name: str, problems: list[str]) -> float | None:
    if value is None or (isinstance(value, str) and is_templated(value)):
        return None  # a template is judged once rendered
    if isinstance(value, str):  # what Jinja renders a number to
        try:
            value = float(value)
        except ValueError:
            problems.append(f"{name} must be a positive number of US dollars, got {value!r:.60}")
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        problems.append(f"{name} must be a positive number of US dollars, got {value!r:.60}")
        return None
    return float(value)
