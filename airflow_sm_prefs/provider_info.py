"""Provider metadata read by Airflow's provider discovery (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from typing import Any

from airflow_sm_prefs import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-sm-prefs",
        "name": "SageMaker instance preferences",
        "description": "Amazon SageMaker training and processing jobs with instance preference lists: "
        "validated before submission, never launched twice, and a record of the configuration SageMaker chose.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "external-doc-url": "https://docs.aws.amazon.com/sagemaker/latest/dg/train-instance-preferences.html",
                "tags": ["aws"],
            }
        ],
        "operators": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "python-modules": ["airflow_sm_prefs.operators"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "python-modules": ["airflow_sm_prefs.triggers"],
            }
        ],
        "plugins": [{"name": "sm_prefs", "plugin-class": "airflow_sm_prefs.plugin.SageMakerPreferencesPlugin"}],
        "extra-links": [
            "airflow_sm_prefs.links.SageMakerConsoleLink",
            "airflow_sm_prefs.links.SageMakerLogsLink",
        ],
    }
