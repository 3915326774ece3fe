"""The cost caps: entries whose on-demand price, for the instances asked and the longest run allowed, is above
``max_hourly_cost_usd`` or ``max_cost_usd``; an entry that has no price cannot be checked and is objected to,
and an entry backed by a training plan is paid for by the plan and never is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.preflight.entries import entries, max_runtime_seconds
from airflow_sm_prefs.request.jobs import JobKind

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
    kind: JobKind, request: Mapping[str, Any], caps: CostCaps, table: PriceTable, region: str | None
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
class WithinCostCaps:
    caps: CostCaps
    table: PriceTable
    region: str | None

    def violations(self, kind: JobKind, request: Mapping[str, Any]) -> dict[int, str]:
        return cost_violations(kind, request, self.caps, self.table, self.region)
