"""The one base of every error this package raises: a DAG author or a script catches
``airflow_sm_prefs.SageMakerPreferencesError`` for all of them, and each error keeps the built-in kind it also
is (``ValueError`` for a bad value, ``OSError`` for a store that fails, Airflow's own exceptions where a task
must fail or not retry)."""

from __future__ import annotations


class SageMakerPreferencesError(Exception):
    """Raised by airflow-sm-prefs: a request SageMaker would refuse, a store that fails, a setting that names
    nothing usable, no capacity within the wait."""
