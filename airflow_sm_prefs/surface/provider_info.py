"""Provider metadata read by Airflow's provider discovery (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any


def _option(description: str, example: str) -> dict[str, Any]:
    return {"description": description, "version_added": "0.1.0", "type": "string", "example": example, "default": None}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-sm-prefs",
        "name": "SageMaker instance preferences",
        "description": "Amazon SageMaker training and processing jobs with instance preference lists: "
        "validated before submission, never launched twice, and a record of the configuration SageMaker chose.",
        "versions": [version("airflow-sm-prefs")],
        "integrations": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "external-doc-url": "https://docs.aws.amazon.com/sagemaker/latest/dg/train-instance-preferences.html",
                "tags": ["aws"],
            }
        ],
        "operators": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "python-modules": ["airflow_sm_prefs.surface.operators"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Amazon SageMaker instance preferences",
                "python-modules": ["airflow_sm_prefs.wait.triggers"],
            }
        ],
        "plugins": [{"name": "sm_prefs", "plugin-class": "airflow_sm_prefs.surface.plugin.SageMakerPreferencesPlugin"}],
        "config": {
            "sm_prefs": {
                "description": "Where the capacity ledger lives and which price table and instance catalogue the "
                "guardrails and cost estimates read.",
                "options": {
                    "storage": _option(
                        "One location every host shares (a URL ObjectStoragePath understands), under which the "
                        "capacity ledger (ledger/), the price table (prices.json) and the certification registry "
                        "(certified.yaml) live unless their own "
                        "option names another place (default: each under $AIRFLOW_HOME/sm_prefs/). S3 needs "
                        "airflow-sm-prefs[s3].",
                        "s3://team-bucket/sm-prefs",
                    ),
                    "storage_conn_id": _option(
                        "The connection of storage's object store (and of price_table's and "
                        "certification_registry's when they are URLs). One that does not exist is refused; unset, "
                        "the default credentials chain is used.",
                        "aws_default",
                    ),
                    "storage_timeout": _option(
                        "Seconds one operation on the shared store may take in all (default 30; each S3 request "
                        "gets half as its read timeout, two attempts): past it a command fails in one line, and a "
                        "task goes on without the team's price table or the job's ledger entry, saying so once "
                        "(docs/shared-store.md).",
                        "30",
                    ),
                    "ledger_path": _option(
                        "The capacity ledger's root, a path ObjectStoragePath understands (default: "
                        "<storage>/ledger, else $AIRFLOW_HOME/sm_prefs/ledger).",
                        "s3://team-bucket/sm-prefs-ledger",
                    ),
                    "ledger_compact_after": _option(
                        "On object storage, how many job objects older than a day a reader of the ledger (a "
                        "command, the Capacity page) lets pile up before it folds them into month objects, under "
                        "a lease so one host folds at a time (default 1000; 0: only `airflow-sm-prefs ledger "
                        "compact` folds).",
                        "1000",
                    ),
                    "ledger_conn_id": _option(
                        "The connection of ledger_path's object store (default: storage_conn_id).", "aws_default"
                    ),
                    "price_table": _option(
                        "The user's price table, read over the shipped one (default: <storage>/prices.json, else "
                        "$AIRFLOW_HOME/sm_prefs/prices.json; where `airflow-sm-prefs prices refresh` writes).",
                        "/opt/airflow/sm_prefs/prices.json",
                    ),
                    "certification_registry": _option(
                        "The certification registry (YAML) that certification DAGs write and certified= reads "
                        "(a path or a URL; default: <storage>/certified.yaml, else "
                        "$AIRFLOW_HOME/sm_prefs/certified.yaml).",
                        "/opt/airflow/sm_prefs/certified.yaml",
                    ),
                    "deferral_hold_seconds": _option(
                        "Seconds after a task defers before its trigger may resume it (default 90; 0: at once). "
                        "Airflow 3.1 to 3.3 fail a task whose trigger event re-queues it before the scheduler has "
                        "taken the deferring try's exit (apache/airflow#67287); the trigger keeps watching meanwhile "
                        "and announces the selection itself, so only a job that ends within the hold waits for it "
                        "(docs/how-it-works.md, 'The deferral race').",
                        "90",
                    ),
                    "check_interval": _option(
                        "Seconds between status checks for the operators that do not set check_interval "
                        "(default 60). Against the emulator, whose clock runs ahead, a few seconds "
                        "(docs/own-airflow.md).",
                        "60",
                    ),
                    "instance_catalogue": _option(
                        "A catalogue of instance types read over the shipped one (types it lacks, corrections).",
                        "/opt/airflow/sm_prefs/instances.json",
                    ),
                },
            }
        },
        "extra-links": [
            "airflow_sm_prefs.surface.links.SageMakerConsoleLink",
            "airflow_sm_prefs.surface.links.SageMakerLogsLink",
        ],
    }
