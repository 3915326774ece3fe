"""airflow-sm-prefs: SageMaker training and processing with instance preference lists, for Apache Airflow.

Kept import-light on purpose: DAG files import this package on every parse, so the operators are
loaded lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.sagemaker.botocore_model import supply_missing_shapes

__version__ = "0.1.0"

# Before any botocore session of this process exists: an older botocore then loads the preference shapes.
supply_missing_shapes()

if TYPE_CHECKING:
    from airflow_sm_prefs.errors.base import SageMakerPreferencesError
    from airflow_sm_prefs.preflight.requirements import InstanceRequirements
    from airflow_sm_prefs.request.job_request import InvalidJobRequest
    from airflow_sm_prefs.surface.certification_dag import certification_dag
    from airflow_sm_prefs.surface.operators import (
        SageMakerPreferenceProcessingOperator,
        SageMakerPreferenceTrainingOperator,
    )

_LAZY = {
    "SageMakerPreferenceTrainingOperator": "airflow_sm_prefs.surface.operators",
    "SageMakerPreferenceProcessingOperator": "airflow_sm_prefs.surface.operators",
    "InstancePreference": "airflow_sm_prefs.request.friendly_preferences",
    "InvalidJobRequest": "airflow_sm_prefs.request.job_request",
    "SageMakerPreferencesError": "airflow_sm_prefs.errors.base",
    "InstanceRequirements": "airflow_sm_prefs.preflight.requirements",
    "certification_dag": "airflow_sm_prefs.surface.certification_dag",
}

__all__ = [
    "InstancePreference",
    "InstanceRequirements",
    "InvalidJobRequest",
    "SageMakerPreferenceProcessingOperator",
    "SageMakerPreferenceTrainingOperator",
    "SageMakerPreferencesError",
    "certification_dag",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_sm_prefs' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
