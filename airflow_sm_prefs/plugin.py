"""The Airflow plugin of this provider: registers the listener that stops jobs of tasks ended by hand."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_sm_prefs import listener


class SageMakerPreferencesPlugin(AirflowPlugin):
    name = "sm_prefs"
    listeners = [listener]
