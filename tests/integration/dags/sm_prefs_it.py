"""DAGs for the `airflow dags test` integration tests: each job kind with a uniform and a per-preference count."""

from __future__ import annotations

import json
import os

import pendulum
from airflow.sdk import DAG, task

from airflow_sm_prefs import SageMakerPreferenceProcessingOperator, SageMakerPreferenceTrainingOperator

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
TRAINING_CONFIG = {
    "RoleArn": ROLE,
    "AlgorithmSpecification": {
        "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/eval:1",
        "TrainingInputMode": "File",
    },
    "InputDataConfig": [
        {
            "ChannelName": "eval",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://datasets/eval/{{ ds }}"}},
        }
    ],
    "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
    "ResourceConfig": {"VolumeSizeInGB": 100},
    "StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxPendingTimeInSeconds": 3600},
}
PROCESSING_CONFIG = {
    "RoleArn": ROLE,
    "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
    "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30}},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}
COMMON = {"aws_conn_id": "sm_emulator", "check_interval": 1}


def _report(dag_id: str, task_ids: list[str]):
    @task
    def report(**context):
        ti = context["ti"]
        results = {
            task_id: {
                "record": ti.xcom_pull(task_ids=task_id),
                "selection": ti.xcom_pull(task_ids=task_id, key="selection"),
            }
            for task_id in task_ids
        }
        with open(os.path.join(os.environ["SM_PREFS_IT_RESULTS"], f"{dag_id}.json"), "w") as stream:
            json.dump(results, stream)

    return report()


with DAG("sm_prefs_it_training", schedule=None, start_date=pendulum.datetime(2026, 11, 1), catchup=False):
    uniform = SageMakerPreferenceTrainingOperator(
        task_id="uniform",
        config={**TRAINING_CONFIG, "ResourceConfig": {"VolumeSizeInGB": 100, "InstanceCount": 2}},
        preferences=["ml.p5.48xlarge", "ml.p4d.24xlarge"],
        **COMMON,
    )
    per_preference = SageMakerPreferenceTrainingOperator(
        task_id="per_preference",
        config=TRAINING_CONFIG,
        preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", "{{ params.p4d_count }}")],
        params={"p4d_count": 2},
        **COMMON,
    )
    [uniform, per_preference] >> _report("sm_prefs_it_training", ["uniform", "per_preference"])

with DAG("sm_prefs_it_processing", schedule=None, start_date=pendulum.datetime(2026, 11, 1), catchup=False):
    uniform = SageMakerPreferenceProcessingOperator(
        task_id="uniform",
        config={
            **PROCESSING_CONFIG,
            "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 30, "InstanceCount": 1}},
        },
        preferences=["ml.g6.12xlarge", "ml.g5.12xlarge"],
        **COMMON,
    )
    per_preference = SageMakerPreferenceProcessingOperator(
        task_id="per_preference",
        config=PROCESSING_CONFIG,
        preferences=[("ml.g6.12xlarge", 1), ("ml.g5.12xlarge", 2)],
        **COMMON,
    )
    [uniform, per_preference] >> _report("sm_prefs_it_processing", ["uniform", "per_preference"])


def _fits_an_hour(record: dict) -> bool | str:
    """The certification check: a benchmark run must finish within an hour."""
    return record["run_seconds"] < 3600 or f"ran {record['run_seconds']:.0f} s, more than an hour"


if os.environ.get("SM_PREFS_IT_REGISTRY"):
    from airflow_sm_prefs.surface.certification_dag import certification_dag

    certification_dag(
        "sm_prefs_it_certification",
        workload="it-fine-tune",
        config=TRAINING_CONFIG,
        candidates=[("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1)],
        registry=os.environ["SM_PREFS_IT_REGISTRY"],
        validate=_fits_an_hour,
        max_pending=pendulum.duration(hours=1),
        aws_conn_id="sm_emulator",
        check_interval=1,
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    )
