"""Where the provider keeps its files when configuration names none: ``$AIRFLOW_HOME/sm_prefs/``, shared by
``make demo``, ``airflow standalone`` and ``airflow dags test`` on one machine."""

from __future__ import annotations

import os


def default_file(name: str) -> str:
    """``$AIRFLOW_HOME/sm_prefs/<name>`` (Airflow's own default home when the variable is unset)."""
    from airflow.configuration import conf

    home = os.environ.get("AIRFLOW_HOME") or conf.get("core", "airflow_home", fallback="~/airflow")
    return os.path.join(os.path.expanduser(home), "sm_prefs", name)
