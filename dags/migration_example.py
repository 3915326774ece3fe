"""Migration guide in code: the same fine-tuning step written the old way and the new way.

`fine_tune_old_way` is the hand-written retry-and-cancel pattern this project replaces: the attempt number
picks an instance type, a loop waits a fixed patience for capacity, then stops the job and fails so that
Airflow retries with the next type. `fine_tune_new_way` hands the whole list to SageMaker.

What disappears: the fallback table indexed by try number (which loses its place when a task is cleared),
the patience loop, the stop-and-fail dance, one job launched per attempt, and the chosen type that lived only
in the task log. What appears: validation at parse time, one job per task instance, and a record in XCom.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator

FALLBACKS = [("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g5.48xlarge", 4)]
PATIENCE_SECONDS = 15 * 60
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11"
BASE_REQUEST = {
    "RoleArn": ROLE,
    "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
    "OutputDataConfig": {"S3OutputPath": "s3://sm-prefs-demo/models"},
    "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
}
START = pendulum.datetime(2026, 11, 1, tz="UTC")

with DAG("fine_tune_old_way", schedule=None, start_date=START, catchup=False, tags=["migration", "before"]):

    @task(retries=len(FALLBACKS) - 1, retry_delay=pendulum.duration(seconds=5))
    def fine_tune(**context) -> dict:
        import time

        from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook
        from airflow.providers.common.compat.sdk import AirflowException

        attempt = context["ti"].try_number
        instance_type, count = FALLBACKS[min(attempt - 1, len(FALLBACKS) - 1)]
        client = SageMakerHook(aws_conn_id="aws_default").conn
        name = f"fine-tune-old-{attempt}-{int(time.time())}"  # unique, so every attempt is another job
        client.create_training_job(
            TrainingJobName=name,
            **BASE_REQUEST,
            ResourceConfig={"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 500},
        )
        waited_until = time.monotonic() + PATIENCE_SECONDS
        while True:
            description = client.describe_training_job(TrainingJobName=name)
            if description["SecondaryStatus"] != "Pending":
                break
            if time.monotonic() > waited_until:
                client.stop_training_job(TrainingJobName=name)
                raise AirflowException(f"no {instance_type} capacity after {PATIENCE_SECONDS} s; next attempt")
            time.sleep(10)
        print(f"capacity found on {instance_type} at attempt {attempt}")
        while description["TrainingJobStatus"] not in ("Completed", "Failed", "Stopped"):
            time.sleep(10)
            description = client.describe_training_job(TrainingJobName=name)
        if description["TrainingJobStatus"] != "Completed":
            raise AirflowException(f"{name} ended {description['TrainingJobStatus']}")
        return {"job_name": name, "instance_type": instance_type, "instance_count": count}

    fine_tune()

with DAG("fine_tune_new_way", schedule=None, start_date=START, catchup=False, tags=["migration", "after"]):
    SageMakerPreferenceTrainingOperator(
        task_id="fine_tune",
        config={**BASE_REQUEST, "ResourceConfig": {"VolumeSizeInGB": 500}},
        preferences=FALLBACKS,
        max_pending=pendulum.duration(hours=4),
        check_interval=5,
    )
