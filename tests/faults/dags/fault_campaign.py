"""The fault campaign's DAGs (tests/faults/test_campaign.py): one per scenario, all triggered by hand.

Every task checks status every 2 s (the emulator runs 60x faster than real time) and, unless a scenario is
about a final failure, retries quickly, as a production DAG with retries would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceProcessingOperator, SageMakerPreferenceTrainingOperator
from tests.faults.invalid import templated_dag
from tests.helpers import processing_request, training_request

RETRYING = {"retries": 2, "retry_delay": timedelta(seconds=2)}
# Scenarios about a final failure: a retry must neither launch another job nor lose the record. One retry
# stays, because Airflow itself can fail a try (apache/airflow#66374) and production DAGs have retries.
FINAL = {"retries": 1, "retry_delay": timedelta(seconds=2), "resubmit_after_failure": False}
QUEUED_PAIR = [("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 1)]  # neither has capacity until a scenario frees it


def _unnamed(request: dict[str, Any], name_field: str) -> dict[str, Any]:
    # No job name: the operator derives one per task instance, as most DAGs would leave it.
    return {key: value for key, value in request.items() if key != name_field}


TRAINING_CONFIG = _unnamed(training_request("x", None), "TrainingJobName")
PROCESSING_CONFIG = _unnamed(processing_request("x", None), "ProcessingJobName")


def training(task_id: str, preferences: list[Any], **kwargs: Any) -> Any:
    return SageMakerPreferenceTrainingOperator(
        task_id=task_id, config=TRAINING_CONFIG, preferences=preferences, check_interval=2, **kwargs
    )


def processing(task_id: str, preferences: list[Any], **kwargs: Any) -> Any:
    return SageMakerPreferenceProcessingOperator(
        task_id=task_id, config=PROCESSING_CONFIG, preferences=preferences, check_interval=2, **kwargs
    )


def training_shards(task_id: str, shards: int, preferences: list[Any], **config: Any) -> Any:
    configs = [
        {**TRAINING_CONFIG, **config, "OutputDataConfig": {"S3OutputPath": f"s3://bucket/output/shard-{shard}"}}
        for shard in range(shards)
    ]
    return SageMakerPreferenceTrainingOperator.partial(
        task_id=task_id, preferences=preferences, check_interval=2
    ).expand(config=configs)


def dag(dag_id: str, default_args: dict[str, Any]) -> DAG:
    return DAG(dag_id, schedule=None, default_args=default_args, max_active_runs=1, tags=["fault-campaign"])


with dag("fault_worker_kill", RETRYING):
    training("train", [("ml.p5.48xlarge", 1)])

with dag("fault_triggerer_restart", RETRYING):
    training_shards("train", 4, QUEUED_PAIR)

with dag("fault_triggerer_restart_logging", RETRYING):
    training("train", [("ml.g5.24xlarge", 1)])

with dag("fault_throttling", RETRYING):
    processing("prepare", [("ml.m5.xlarge", 1)])
    training_shards("train", 4, QUEUED_PAIR)

with dag("fault_triggerer_stalled", RETRYING):
    # Jobs that run long enough (150 s) to be still running when a stalled triggerer wakes (production 2d).
    training_shards("train", 4, [("ml.g5.8xlarge", 1)], StoppingCondition={"MaxRuntimeInSeconds": 4 * 3600})

with dag("fault_emulator_restart", RETRYING):
    training_shards("train", 3, QUEUED_PAIR)

with dag("fault_user_actions", RETRYING):
    training("marked_failed_while_pending", [("ml.p5.48xlarge", 1)])
    training("cleared_while_running", [("ml.g5.24xlarge", 1)])

with dag("fault_run_marked_failed", RETRYING):
    training("pending", [("ml.p5.48xlarge", 1)])
    training("running", [("ml.g5.24xlarge", 1)])


def blocking_wait() -> Any:
    """Waits in its worker slot, so losing the worker loses the wait (tests/production: a Celery worker lost).
    The job runs 150 s (campaign.yaml), longer than the lost try's heartbeat timeout and its retry's start."""
    return SageMakerPreferenceTrainingOperator(
        task_id="blocking_wait",
        config={**TRAINING_CONFIG, "StoppingCondition": {"MaxRuntimeInSeconds": 4 * 3600}},
        preferences=[("ml.g5.8xlarge", 1)],
        check_interval=2,
        deferrable=False,
    )


with dag("fault_worker_lost", RETRYING):
    blocking_wait()

with dag("fault_worker_lost_for_good", {"retries": 0}):
    blocking_wait()

with dag("fault_task_tabs", RETRYING):
    # Jobs that start at once and end in seconds: the task instance tab of an unmapped and of a mapped task.
    training("single", [("ml.g5.48xlarge", 1)])
    training_shards("shards", 2, [("ml.g5.48xlarge", 1)])

with dag("fault_store_down", RETRYING):
    # Jobs that end while the shared store refuses every connection (production 9): a deferred and a blocking wait.
    training("deferred", [("ml.g5.24xlarge", 1)])
    processing("blocking", [("ml.m5.xlarge", 1)], deferrable=False)

with dag("fault_pending_bound", FINAL):
    training("training_without_capacity", [("ml.p5.48xlarge", 1)], max_pending=timedelta(minutes=30))
    # Processing patience is the operator's own and counts real seconds (the emulator's clock is 60x).
    processing("processing_without_capacity", [("ml.g5.12xlarge", 1)], max_pending=30)
    training("sibling_falls_back", [("ml.g6.48xlarge", 1), ("ml.g5.48xlarge", 1)])

with dag("fault_incompatible_fallback", FINAL):
    training("falls_back_then_fails", [("ml.g6.48xlarge", 1), ("ml.g6e.48xlarge", 1)])

templated_dag()
