"""A DAG whose preference list SageMaker would reject: it must fail at parse time, creating nothing."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator

with DAG("sm_prefs_invalid", schedule=None, start_date=pendulum.datetime(2026, 11, 1), catchup=False):
    SageMakerPreferenceTrainingOperator(
        task_id="broken",
        aws_conn_id="sm_emulator",
        config={
            "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
            "AlgorithmSpecification": {"TrainingImage": "img:1", "TrainingInputMode": "File"},
            "OutputDataConfig": {"S3OutputPath": "s3://models/out"},
            "ResourceConfig": {"VolumeSizeInGB": 100},
        },
        preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g5.48xlarge", None)],
    )
