"""Certify the nightly pipeline's fine-tuning step (nightly_evaluation.py): run it once on each candidate
configuration with the production image, a fixed certification dataset and the same operator, and record
the ones that complete within the window in the certification registry ([sm_prefs] certification_registry,
by default $AIRFLOW_HOME/sm_prefs/certified.yaml). nightly_evaluation lists only what this certified, with
certified="strict": until this has run once, that DAG does not import.

Run it by hand before the first nightly run, and again whenever the image or a candidate changes.
"""

from __future__ import annotations

import pendulum

from airflow_sm_prefs import InstancePreference, certification_dag

BUCKET = "{{ var.value.get('sm_prefs_bucket', 'sm-prefs-demo') }}"
IMAGE = "{{ var.value.get('sm_prefs_image', '123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11') }}"
# A certification run must finish within the fine-tuning step's share of the nightly window.
LONGEST_ACCEPTABLE_RUN_SECONDS = 2 * 3600


def finishes_in_the_window(record: dict) -> bool | str:
    seconds = record["run_seconds"]
    return seconds <= LONGEST_ACCEPTABLE_RUN_SECONDS or f"ran {seconds:.0f} s, over {LONGEST_ACCEPTABLE_RUN_SECONDS} s"


certification_dag(
    "nightly_fine_tune_certification",
    workload="nightly-fine-tune",
    # The nightly fine-tuning request, on the certification dataset instead of the night's shards.
    config={
        "RoleArn": "{{ var.value.get('sm_prefs_role_arn', 'arn:aws:iam::123456789012:role/SageMakerRole') }}",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "HyperParameters": {"epochs": "1", "run_date": "certification"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/certification/shards"}
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/certification/models"},
        "ResourceConfig": {"VolumeSizeInGB": 500},
        "StoppingCondition": {"MaxRuntimeInSeconds": 6 * 3600},
    },
    # Equivalent capacity: one H100 node, two A100 nodes, or four A10G nodes.
    candidates=[
        InstancePreference("ml.p5.48xlarge", 1),
        InstancePreference("ml.p4d.24xlarge", 2),
        InstancePreference("ml.g5.48xlarge", 4),
    ],
    validate=finishes_in_the_window,
    max_pending=pendulum.duration(hours=1),
    check_interval=5,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    doc_md=__doc__,
)
