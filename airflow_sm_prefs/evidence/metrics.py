"""Metrics about ended jobs (``sm_prefs.*``), through Airflow's stats so they reach StatsD or OpenTelemetry."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_sm_prefs.platform.stats import stats as _stats

if TYPE_CHECKING:
    from airflow_sm_prefs.evidence.ledger_entry import LedgerEntry


def emit_end(entry: LedgerEntry) -> None:
    """How a job ended and, if it ran, for how long and at what cost (``sm_prefs.ended``,
    ``sm_prefs.run_seconds``, ``sm_prefs.estimated_cost_usd``)."""
    stats = _stats()
    tags = {
        "job_kind": entry["job_kind"],
        "instance_type": str(entry["selected_instance_type"]),
        "rank": str(entry["selected_rank"]),
        "outcome": entry["outcome"],
    }
    stats.incr("sm_prefs.ended", tags=tags)
    if entry["run_seconds"] is not None:
        stats.timing("sm_prefs.run_seconds", timedelta(seconds=entry["run_seconds"]), tags=tags)
    if entry["estimated_cost_usd"] is not None:  # an unknown cost is not sent as 0
        stats.gauge("sm_prefs.estimated_cost_usd", entry["estimated_cost_usd"], tags=tags)
