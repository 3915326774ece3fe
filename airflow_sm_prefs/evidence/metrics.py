"""Metrics about selections (``sm_prefs.*``), through Airflow's stats so they reach StatsD or OpenTelemetry."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.evidence.record import Selection

if TYPE_CHECKING:
    from airflow_sm_prefs.evidence.ledger import LedgerEntry


def _stats() -> Any:
    """Airflow's ``Stats`` on every supported line (3.3's ``airflow.sdk.observability.stats``, 3.2's class of
    the same name without module-level ``incr``, 3.1's ``airflow.stats``), as common.compat finds it."""
    from airflow.providers.common.compat.sdk import Stats

    return Stats


def emit_selection(chosen: Selection) -> None:
    stats = _stats()
    tags = {
        "job_kind": chosen["job_kind"],
        "instance_type": str(chosen["selected_instance_type"]),
        "rank": str(chosen["selected_rank"]),
    }
    stats.incr("sm_prefs.selected", tags=tags)
    stats.gauge("sm_prefs.selected_rank", chosen["selected_rank"] or 0, tags=tags)
    stats.timing("sm_prefs.pending_seconds", timedelta(seconds=chosen["pending_seconds"]), tags=tags)
    if chosen["fell_back"]:
        stats.incr("sm_prefs.fallback", tags=tags)


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
