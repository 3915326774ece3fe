"""A job whose Environment and HyperParameters carry a Variable's secret value, and its Environment a connection's
password (tests/e2e/test_secrets.py; also the job whose lines test_cloudwatch_task_logs.py follows into
CloudWatch)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator

SECRET = "{{ var.value.sm_prefs_api_token }}"

with DAG(
    dag_id="secret_in_job",
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
            "HyperParameters": {"api_token": SECRET, "epochs": "1"},
            "Environment": {
                "WANDB_API_KEY": SECRET,
                "REGISTRY_PASSWORD": "{{ conn.sm_prefs_registry.password }}",
                "STAGE": "nightly",
            },
            "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-demo/models"},
            "ResourceConfig": {"InstanceCount": 1, "VolumeSizeInGB": 100},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        check_interval=5,
        # The job echoes its environment (the emulator's echo_environment): the lines the triggerer shows.
        stream_logs=True,
    )
