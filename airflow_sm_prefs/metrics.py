"""Metrics about selections (``sm_prefs.*``), through Airflow's stats so they reach StatsD or OpenTelemetry."""

from __future__ import annotations

from datetime import timedelta

from airflow_sm_prefs.record import Selection


def emit_selection(chosen: Selection) -> None:
    try:
        from airflow.sdk.observability import stats
    except ImportError:  # pragma: no cover - Airflow < 3.3
        return
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
