"""Airflow's metrics client, the same on every supported line, for the worker and the triggerer alike."""

from __future__ import annotations

from typing import Any


def stats() -> Any:
    """Airflow's ``Stats`` on every supported line (3.3's ``airflow.sdk.observability.stats``, 3.2's class of
    the same name without module-level ``incr``, 3.1's ``airflow.stats``), as common.compat finds it."""
    from airflow.providers.common.compat.sdk import Stats

    return Stats
