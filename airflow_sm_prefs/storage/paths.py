"""Where the provider keeps its files when configuration names none: ``$AIRFLOW_HOME/sm_prefs/``, shared by
``make demo``, ``airflow standalone`` and ``airflow dags test`` on one machine; and where the package keeps the
data it ships."""

from __future__ import annotations

import os
from pathlib import Path

# The instance catalogue, the price table and botocore's preference-list shapes, as shipped in the wheel.
SHIPPED_DATA = Path(__file__).resolve().parents[1] / "data"


def default_file(name: str) -> str:
    """``$AIRFLOW_HOME/sm_prefs/<name>`` (Airflow's own default home when the variable is unset)."""
    from airflow.configuration import conf

    home = os.environ.get("AIRFLOW_HOME") or conf.get("core", "airflow_home", fallback="~/airflow")
    return os.path.join(os.path.expanduser(home), "sm_prefs", name)
