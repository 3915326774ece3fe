"""Nightly evaluation: prepare data, fine-tune on whichever GPU configuration has capacity, then evaluate
on a GPU processing job sharded and sized from the configuration SageMaker chose, and write a run summary.

Runs unchanged against real AWS (set the Variables below and point `aws_default` at your account) or the
bundled emulator (`make demo`).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

from airflow_sm_prefs import (
    InstancePreference,
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)

ROLE = "{{ var.value.get('sm_prefs_role_arn', 'arn:aws:iam::123456789012:role/SageMakerRole') }}"
BUCKET = "{{ var.value.get('sm_prefs_bucket', 'sm-prefs-demo') }}"
IMAGE = "{{ var.value.get('sm_prefs_image', '123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11') }}"

# The evaluation's own preferences: instance types with 4 GPUs each, as many as the shards need.
EVALUATION_TYPES = ("ml.g5.12xlarge", "ml.g6.12xlarge")
GPUS_PER_EVALUATION_INSTANCE = 4
PLAN = "ti.xcom_pull(task_ids='plan_evaluation')"

with DAG(
    dag_id="nightly_evaluation",
    schedule="0 2 * * *",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    # Retries are safe here: a retry reattaches to the task's SageMaker job and never launches another. They
    # also ride out the scheduler race that can fail a deferred try (apache/airflow#66374).
    default_args={"retries": 2, "retry_delay": timedelta(seconds=20)},
    tags=["sagemaker", "instance-preferences"],
    doc_md=__doc__,
):
    prepare_data = SageMakerPreferenceProcessingOperator(
        task_id="prepare_data",
        config={
            "RoleArn": ROLE,
            "AppSpecification": {"ImageUri": IMAGE, "ContainerEntrypoint": ["python", "prepare.py"]},
            "ProcessingInputs": [
                {
                    "InputName": "raw",
                    "S3Input": {
                        "S3Uri": f"s3://{BUCKET}/raw/{{{{ ds }}}}",
                        "LocalPath": "/opt/ml/processing/raw",
                        "S3DataType": "S3Prefix",
                        "S3InputMode": "File",
                    },
                }
            ],
            "ProcessingOutputConfig": {
                "Outputs": [
                    {
                        "OutputName": "shards",
                        "S3Output": {
                            "S3Uri": f"s3://{BUCKET}/shards/{{{{ ds }}}}",
                            "LocalPath": "/opt/ml/processing/shards",
                            "S3UploadMode": "EndOfJob",
                        },
                    }
                ]
            },
            "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 100}},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        preferences=[("ml.m5.4xlarge", 2), ("ml.c5.xlarge", 4)],
        max_pending=pendulum.duration(hours=1),
        check_interval=5,
    )

    fine_tune = SageMakerPreferenceTrainingOperator(
        task_id="fine_tune",
        config={
            "RoleArn": ROLE,
            "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
            "HyperParameters": {"epochs": "1", "run_date": "{{ ds }}"},
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/shards/{{{{ ds }}}}"}
                    },
                }
            ],
            "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/models"},
            "ResourceConfig": {"VolumeSizeInGB": 500},
            "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
        },
        # What nightly_fine_tune_certification (nightly_certification.py) certified: 4 x ml.g5.48xlarge did
        # not pass (the image's CUDA build has no kernels for its GPU), and listing it again would make
        # certified="strict" refuse this DAG at import.
        preferences=[InstancePreference("ml.p5.48xlarge", 1), InstancePreference("ml.p4d.24xlarge", 2)],
        workload="nightly-fine-tune",
        certified="strict",
        max_pending=pendulum.duration(hours=1),
        check_interval=5,
    )

    @task
    def plan_evaluation(chosen: dict) -> dict:
        """Shard the evaluation over every accelerator SageMaker gave us, sized to their memory."""
        import math

        from airflow_sm_prefs.reference.instance_catalogue import current

        hardware = current()[chosen["selected_instance_type"]]  # accelerators and their memory, from AWS's facts
        accelerators = hardware.accelerators * chosen["selected_instance_count"]
        memory_gib = int(hardware.accelerator_memory_gib or 0)
        instances = math.ceil(accelerators / GPUS_PER_EVALUATION_INSTANCE)
        return {
            "instance_type": chosen["selected_instance_type"],
            "instance_count": chosen["selected_instance_count"],
            "shards": accelerators,
            "batch_size_per_accelerator": max(1, memory_gib // 5),
            "model_job": chosen["job_name"],
            "evaluation_preferences": [{"InstanceType": t, "InstanceCount": instances} for t in EVALUATION_TYPES],
        }

    evaluate = SageMakerPreferenceProcessingOperator(
        task_id="evaluate",
        config={
            "RoleArn": ROLE,
            "AppSpecification": {"ImageUri": IMAGE, "ContainerEntrypoint": ["python", "evaluate.py"]},
            "Environment": {
                "EVAL_SHARDS": f"{{{{ {PLAN}['shards'] }}}}",
                "BATCH_SIZE_PER_ACCELERATOR": f"{{{{ {PLAN}['batch_size_per_accelerator'] }}}}",
            },
            "ProcessingInputs": [
                {
                    "InputName": "model",
                    "S3Input": {
                        "S3Uri": f"s3://{BUCKET}/models/{{{{ {PLAN}['model_job'] }}}}/output",
                        "LocalPath": "/opt/ml/processing/model",
                        "S3DataType": "S3Prefix",
                        "S3InputMode": "File",
                    },
                }
            ],
            "ProcessingOutputConfig": {
                "Outputs": [
                    {
                        "OutputName": "scores",
                        "S3Output": {
                            "S3Uri": f"s3://{BUCKET}/evaluations/{{{{ ds }}}}",
                            "LocalPath": "/opt/ml/processing/scores",
                            "S3UploadMode": "EndOfJob",
                        },
                    }
                ]
            },
            "ProcessingResources": {"ClusterConfig": {"VolumeSizeInGB": 100}},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        },
        # Sized from what fine_tune got: its accelerators, split over 4-GPU evaluation instances.
        preferences=f"{{{{ {PLAN}['evaluation_preferences'] | tojson }}}}",
        max_pending=pendulum.duration(hours=2),
        check_interval=5,
    )

    @task
    def inspect_model(training: dict) -> dict:
        """Open the model the training job wrote: where registration or a deeper evaluation would start."""
        import io
        import tarfile

        from airflow.providers.amazon.aws.hooks.s3 import S3Hook
        from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

        description = SageMakerHook(aws_conn_id="aws_default").describe_training_job(training["job_name"])
        uri = description["ModelArtifacts"]["S3ModelArtifacts"]
        bucket, key = S3Hook.parse_s3_url(uri)
        data = S3Hook(aws_conn_id="aws_default").get_key(key, bucket).get()["Body"].read()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            files = archive.getnames()
        return {"model_artifact": uri, "bytes": len(data), "files": files}

    @task
    def write_summary(preparation: dict, training: dict, evaluation: dict, plan: dict, model: dict, **context) -> str:
        import json
        import os

        rows = []
        for record in (preparation, training, evaluation):
            rows.append(
                f"| {record['job_kind']} | {record['selected_instance_count']} x {record['selected_instance_type']} "
                f"| #{record['selected_rank'] + 1}{' (fallback)' if record['fell_back'] else ''} "
                f"| {record['pending_seconds']:.0f} s | {record['run_seconds'] or 0:.0f} s |"
            )
        summary = "\n".join(
            [
                f"# Nightly evaluation {context['ds']}",
                "| job | configuration | preference | waited | ran |",
                "|---|---|---|---|---|",
                *rows,
                "",
                f"Evaluation: {plan['shards']} shards on {evaluation['selected_instance_count']} x "
                f"{evaluation['selected_instance_type']}, "
                f"batch size {plan['batch_size_per_accelerator']} per accelerator.",
                f"Model: {model['model_artifact']} ({model['bytes']} bytes).",
            ]
        )
        print(summary)
        folder = os.environ.get("SM_PREFS_SUMMARY_DIR")
        if folder:
            with open(os.path.join(folder, f"nightly_evaluation_{context['ds']}.json"), "w") as stream:
                json.dump(
                    {
                        "preparation": preparation,
                        "training": training,
                        "evaluation": evaluation,
                        "plan": plan,
                        "model": model,
                    },
                    stream,
                    indent=2,
                )
        return summary

    plan = plan_evaluation(fine_tune.output)
    prepare_data >> fine_tune
    plan >> evaluate
    write_summary(prepare_data.output, fine_tune.output, evaluate.output, plan, inspect_model(fine_tune.output))
