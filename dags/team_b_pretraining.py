"""Another team's training in the same AWS account and Region: a pretraining run of most of a day on one
ml.p5.48xlarge, nothing else on demand, and at most an hour's wait for it. It runs when that team triggers it
(`make demo` does, each night, beside the nightly pipeline). With ``training_plans="auto"``, a Flexible Training
Plan the account holds for that type is tried first, when one is Active and has an instance free; `make demo`
buys one when `airflow-sm-prefs plans advise` says it pays.

It is also evidence. When nightly_evaluation's fine-tuning falls back from ml.p5.48xlarge, this DAG's job
waiting for that same type at the same time is what tells the capacity report how long waiting would have
taken (`airflow-sm-prefs report`, "did the fallback pay off"). Without it, the report can say only how long
the first choice would have had to stay sold out for the fallback to pay off.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_sm_prefs import InstancePreference, SageMakerPreferenceTrainingOperator

BUCKET = "{{ var.value.get('sm_prefs_bucket', 'sm-prefs-demo') }}"
IMAGE = "{{ var.value.get('sm_prefs_image', '123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11') }}"

with DAG(
    dag_id="team_b_pretraining",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["sagemaker", "instance-preferences"],
    doc_md=__doc__,
):
    SageMakerPreferenceTrainingOperator(
        task_id="pretrain",
        config={
            "RoleArn": "{{ var.value.get('sm_prefs_role_arn', 'arn:aws:iam::123456789012:role/SageMakerRole') }}",
            "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/certification/shards"}
                    },
                }
            ],
            "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/team-b/models"},
            "ResourceConfig": {"VolumeSizeInGB": 500},
            "StoppingCondition": {"MaxRuntimeInSeconds": 24 * 3600},
        },
        preferences=[InstancePreference("ml.p5.48xlarge", 1)],
        max_pending=pendulum.duration(hours=1),
        training_plans="auto",
        check_interval=5,
    )
