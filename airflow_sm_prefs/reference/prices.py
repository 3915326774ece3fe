"""On-demand prices of SageMaker instances per Region and job kind: what cost estimates and cost caps read.

Two layers, the second replacing the first entry by entry (Region, kind, instance type):

1. the table shipped with the package (``data/prices.json``), with its source and the date it was retrieved;
2. the user's table: the file ``[sm_prefs] price_table`` names (``AIRFLOW__SM_PREFS__PRICE_TABLE``), by
   default ``<[sm_prefs] storage>/prices.json``, or ``$AIRFLOW_HOME/sm_prefs/prices.json`` without one, which
   is where ``airflow-sm-prefs prices refresh`` writes what the AWS Price List API answers. A team with
   negotiated rates writes its own here.

A price nobody gave is unknown (``None``), never 0. Jobs on a Flexible Training Plan are paid for by the
plan, so they are never priced as on-demand.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.storage import object_storage, paths, user_files

log = logging.getLogger(__name__)

FORMAT = 1
KINDS = ("training", "processing")
CostBasis = Literal["on-demand", "plan-backed", "unknown-price", "unknown-billed-time", "not-billed"]


class PriceTableError(SageMakerPreferencesError, ValueError):
    """A price table that cannot be read as written (the message names the file and the entry)."""


@dataclass(frozen=True)
class PriceSource:
    source: str
    retrieved: str | None  # ISO date; None when the table was never filled from its source


@dataclass(frozen=True)
class HourlyPrice:
    usd: float
    origin: PriceSource


@dataclass(frozen=True)
class PriceTable:
    # (region, kind, instance type) -> price
    entries: dict[tuple[str, str, str], HourlyPrice] = field(default_factory=dict)
    sources: tuple[PriceSource, ...] = ()

    def hourly(self, region: str | None, kind: str, instance_type: str | None) -> HourlyPrice | None:
        if region is None or instance_type is None:
            return None
        return self.entries.get((region, kind, instance_type))

    def layered(self, other: PriceTable) -> PriceTable:
        """This table with ``other``'s entries replacing its own."""
        return PriceTable({**self.entries, **other.entries}, self.sources + other.sources)


def parse(raw: Any, where: str) -> PriceTable:
    """A table from its JSON form; ``PriceTableError`` naming ``where`` and the entry at fault."""
    if not isinstance(raw, dict):
        raise PriceTableError(f"{where}: expected a JSON object")
    if raw.get("format") != FORMAT:
        raise PriceTableError(f"{where}: format {raw.get('format')!r}, this version reads {FORMAT}")
    source, retrieved, prices = raw.get("source"), raw.get("retrieved"), raw.get("prices")
    if not isinstance(source, str) or not source.strip():
        raise PriceTableError(f"{where}: 'source' must say where the prices come from")
    if retrieved is not None and not isinstance(retrieved, str):
        raise PriceTableError(f"{where}: 'retrieved' must be an ISO date or null")
    if raw.get("currency", "USD") != "USD":
        raise PriceTableError(f"{where}: only USD prices are read, not {raw.get('currency')!r}")
    if not isinstance(prices, dict):
        raise PriceTableError(f"{where}: 'prices' must map Region -> kind -> instance type -> USD per hour")
    origin = PriceSource(source.strip(), retrieved)
    entries: dict[tuple[str, str, str], HourlyPrice] = {}
    for region, by_kind in prices.items():
        if not isinstance(by_kind, dict):
            raise PriceTableError(f"{where}: prices.{region} must map a job kind to prices")
        for kind, by_type in by_kind.items():
            if kind not in KINDS:
                raise PriceTableError(f"{where}: prices.{region}.{kind}: the kind is one of {', '.join(KINDS)}")
            if not isinstance(by_type, dict):
                raise PriceTableError(f"{where}: prices.{region}.{kind} must map instance types to prices")
            for instance_type, price in by_type.items():
                entries[(region, kind, instance_type)] = HourlyPrice(
                    _price(price, f"{where}: prices.{region}.{kind}.{instance_type}"), origin
                )
    return PriceTable(entries, (origin,))


def _price(value: Any, where: str) -> float:
    # Strings are accepted because the Price List API gives prices as decimal strings.
    try:
        number = float(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise PriceTableError(f"{where}: a price is a non-negative number of USD per instance-hour, not {value!r}")
    return number


def to_json(table: dict[str, dict[str, dict[str, str]]], source: str, retrieved: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "currency": "USD",
        "unit": "instance-hour",
        "source": source,
        "retrieved": retrieved,
        "prices": table,
    }


MAX_TABLE_BYTES = 64 << 20  # every Region's prices are about 1 MB


def read_file(path: Any) -> PriceTable:
    from airflow_sm_prefs.storage import untrusted_files

    try:
        raw = untrusted_files.read_json(path, MAX_TABLE_BYTES)
    except untrusted_files.UntrustedFileError as error:
        raise PriceTableError(str(error)) from None
    return parse(raw, str(path))


def shipped() -> PriceTable:
    text = (paths.SHIPPED_DATA / "prices.json").read_text(encoding="utf-8")
    return parse(json.loads(text), "airflow_sm_prefs/data/prices.json")


def user_table_path() -> Any:
    """Where the user's table is read from, and where ``prices refresh`` writes by default: ``[sm_prefs]
    price_table``, else ``<[sm_prefs] storage>/prices.json``, else local (a ``Path``; on object storage an
    ``ObjectStoragePath``)."""
    return object_storage.shared_file("price_table", "prices.json")


def users_table(where: Any = None) -> PriceTable | None:
    """The team's own table (at ``where``, else where it is configured), read within ``[sm_prefs]
    storage_timeout``; None when there is none. What makes it unreadable is raised: each caller words it."""
    from airflow_sm_prefs.storage import bounded

    where = user_table_path() if where is None else where
    try:
        return bounded.within(
            f"the price table {object_storage.shown(where)}", lambda: user_files.parsed(where, read_file)
        )
    except FileNotFoundError:
        return None


def current() -> PriceTable:
    """The shipped table with the user's over it (re-read when the user's file changes).

    A user's table that cannot be read, for whatever reason and within ``[sm_prefs] storage_timeout``, is reported
    and left out: a cost estimate is never a reason to fail a job's task, nor to keep it waiting on a store that
    does not answer (a cost cap, which depends on it, refuses in ``guardrails``)."""
    table = shipped()
    try:
        users = users_table()
    except (object_storage.StorageUnavailable, PriceTableError) as error:
        log.warning("Price table left out: %s", error)
        return table
    except Exception as error:  # the store refused or failed (botocore's errors are not OSErrors)
        log.warning("Price table left out: it could not be read (%s: %s)", type(error).__name__, error)
        return table
    return table if users is None else table.layered(users)


@dataclass(frozen=True)
class CostEstimate:
    usd: float | None
    basis: CostBasis


def estimate(
    table: PriceTable,
    *,
    region: str | None,
    kind: str,
    instance_type: str | None,
    instance_seconds: float | None,
    plan_backed: bool,
) -> CostEstimate:
    """What a job cost at on-demand prices: billed instance-seconds x the hourly price."""
    if plan_backed:
        return CostEstimate(None, "plan-backed")
    if instance_type is None:
        return CostEstimate(0.0, "not-billed")  # never got capacity: SageMaker bills from the instances' start
    price = table.hourly(region, kind, instance_type)
    if price is None:
        return CostEstimate(None, "unknown-price")
    if instance_seconds is None:
        return CostEstimate(None, "unknown-billed-time")
    return CostEstimate(round(instance_seconds * price.usd / 3600.0, 4), "on-demand")


def format_usd(value: float | None, basis: CostBasis | None = None) -> str:
    if basis == "plan-backed":
        return "plan-backed"
    return "unknown" if value is None else f"${value:,.2f}"
