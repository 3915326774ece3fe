"""The real-clock campaign's DAGs (tests/faults/real_clock.py): 50 mapped training tasks, without and with a retry,
each polling every 5 s as every example DAG of the project does."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
from tests.helpers import training_request

SHARDS = 50
CHECK_INTERVAL = 5
CONFIG = {key: value for key, value in training_request("x", None).items() if key != "TrainingJobName"}

for retries in (0, 1):
    with DAG(
        f"real_clock_retries_{retries}",
        schedule=None,
        default_args={"retries": retries, "retry_delay": timedelta(seconds=2)},
        max_active_runs=1,
        max_active_tasks=SHARDS,
        tags=["fault-campaign", "real-clock"],
    ):
        SageMakerPreferenceTrainingOperator.partial(
            task_id="train",
            preferences=[("ml.g5.48xlarge", 1), ("ml.g5.24xlarge", 1)],
            check_interval=CHECK_INTERVAL,
        ).expand(
            config=[
                {**CONFIG, "OutputDataConfig": {"S3OutputPath": f"s3://bucket/output/real-clock-{shard}"}}
                for shard in range(SHARDS)
            ]
        )
