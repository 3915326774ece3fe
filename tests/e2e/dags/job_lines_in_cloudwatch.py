"""A job whose lines the triggerer streams while task logs are in CloudWatch (test_cloudwatch_task_logs.py)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator

with DAG(
    dag_id="job_lines_in_cloudwatch",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
):
    SageMakerPreferenceTrainingOperator(
        task_id="train",
        preferences=["ml.p5.48xlarge", "ml.p4d.24xlarge"],
        config={
            "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
            "AlgorithmSpecification": {
                "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11",
                "TrainingInputMode": "File",
            },
            "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-demo/models"},
            "ResourceConfig": {"InstanceCount": 1, "VolumeSizeInGB": 100},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        check_interval=5,
        stream_logs=True,
    )
