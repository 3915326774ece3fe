"""The instance metrics SageMaker publishes for a job's hosts, read from CloudWatch once, after the job ends.

SageMaker publishes, once a minute for each host of a training or processing job, ``GPUUtilization``,
``GPUMemoryUtilization``, ``CPUUtilization`` and ``MemoryUtilization`` in ``/aws/sagemaker/TrainingJobs`` or
``/aws/sagemaker/ProcessingJobs``, dimension ``Host`` = ``<job name>/algo-<n>`` (AWS's "SageMaker AI job
metrics"). GPU figures are a percent x the instance's GPUs, CPU a percent x its vCPUs: ``facts/utilization.py``
turns them into shares of one device. One ``GetMetricData`` call (more pages only for very large jobs), with
this module's deadlines; the caller needs ``cloudwatch:GetMetricData`` (``deploy/iam-policy.json``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker.connection import Connection

METRICS = ("GPUUtilization", "GPUMemoryUtilization", "CPUUtilization", "MemoryUtilization")
PERIOD_SECONDS = 60
MAX_QUERIES_PER_CALL = 500  # CloudWatch's limit
MAX_HOSTS = MAX_QUERIES_PER_CALL // len(METRICS)  # beyond it, the first hosts stand for the job
MAX_PAGES = 5  # a job of up to 125 hosts fits one page; the bound keeps a misbehaving store short
CALL_CONFIG = {"connect_timeout": 5, "read_timeout": 10, "retries": {"total_max_attempts": 2, "mode": "standard"}}
# SageMaker publishes a minute's figures a little after it: read up to this much past the job's end.
PUBLISHING_LAG = dt.timedelta(minutes=5)

HostValues = dict[str, list[list[float]]]  # metric -> one list of values per host


class MetricsUnreadable(SageMakerPreferencesError):
    """CloudWatch did not answer with the job's metrics; the message says what to check."""


def client(connection: Connection) -> Any:
    """A CloudWatch client for the task's connection, with this module's deadlines."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(**connection.with_call_config(CALL_CONFIG).hook_arguments(), client_type="cloudwatch").conn


def read(
    cloudwatch: Any, *, kind: JobKind, job_name: str, hosts: int, started: dt.datetime, ended: dt.datetime
) -> HostValues:
    """What each of the job's ``hosts`` published of each metric while it ran (average per minute)."""
    from botocore.exceptions import BotoCoreError, ClientError

    queries: list[dict[str, Any]] = [
        {
            "Id": f"m{metric_index}h{host}",
            "MetricStat": {
                "Metric": {
                    "Namespace": kind.metrics_namespace,
                    "MetricName": metric,
                    "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{host}"}],
                },
                "Period": PERIOD_SECONDS,
                "Stat": "Average",
            },
        }
        for metric_index, metric in enumerate(METRICS)
        for host in range(1, min(hosts, MAX_HOSTS) + 1)
    ]
    values: dict[str, list[float]] = {str(query["Id"]): [] for query in queries}
    arguments: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": started,
        "EndTime": ended + PUBLISHING_LAG,
    }
    try:
        for _ in range(MAX_PAGES):
            answer = cloudwatch.get_metric_data(**arguments)
            for result in answer.get("MetricDataResults", []):
                values.setdefault(result["Id"], []).extend(float(v) for v in result.get("Values", []))
            if not answer.get("NextToken"):
                break
            arguments["NextToken"] = answer["NextToken"]
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        raise MetricsUnreadable(
            f"CloudWatch refused GetMetricData ({code}): check that the connection's role may call "
            "cloudwatch:GetMetricData (deploy/iam-policy.json)"
        ) from error
    except BotoCoreError as error:
        raise MetricsUnreadable(f"CloudWatch did not answer GetMetricData: {error}") from error
    return {
        metric: [values[f"m{metric_index}h{host}"] for host in range(1, min(hosts, MAX_HOSTS) + 1)]
        for metric_index, metric in enumerate(METRICS)
    }
