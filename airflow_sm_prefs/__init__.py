"""airflow-sm-prefs: SageMaker training and processing with instance preference lists, for Apache Airflow.

Kept import-light on purpose: DAG files import this package on every parse, so the operators are
loaded lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.botocore_model import supply_missing_shapes

__version__ = "0.1.0"

# Before any botocore session of this process exists: an older botocore then loads the preference shapes.
supply_missing_shapes()

if TYPE_CHECKING:
    from airflow_sm_prefs.job_request import InvalidJobRequest
    from airflow_sm_prefs.operators import (
        SageMakerPreferenceProcessingOperator,
        SageMakerPreferenceTrainingOperator,
    )
    from airflow_sm_prefs.requirements import InstanceRequirements

_LAZY = {
    "SageMakerPreferenceTrainingOperator": "airflow_sm_prefs.operators",
    "SageMakerPreferenceProcessingOperator": "airflow_sm_prefs.operators",
    "InstancePreference": "airflow_sm_prefs.preferences",
    "InvalidJobRequest": "airflow_sm_prefs.job_request",
    "InstanceRequirements": "airflow_sm_prefs.requirements",
}

__all__ = [
    "InstancePreference",
    "InstanceRequirements",
    "InvalidJobRequest",
    "SageMakerPreferenceProcessingOperator",
    "SageMakerPreferenceTrainingOperator",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_sm_prefs' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
