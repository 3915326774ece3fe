"""CloudWatch's ``GetMetricData`` on the emulator's endpoint: the instance metrics SageMaker publishes for a job.

SageMaker publishes, once a minute for each host of a running training or processing job, ``CPUUtilization``,
``MemoryUtilization``, ``GPUUtilization`` and ``GPUMemoryUtilization`` in the namespaces
``/aws/sagemaker/TrainingJobs`` and ``/aws/sagemaker/ProcessingJobs``, with one dimension, ``Host``:
``<job name>/algo-<n>`` (n from 1). GPU figures are a percent x the instance's GPUs, CPU a percent x its vCPUs
(AWS's "SageMaker AI job metrics" reference).

The emulator derives them from the scenario's ``utilization`` of the job's selected type: one value per minute
of the job's run on the virtual clock, a few points above or below the scenario's figure by host and minute
(so a mean and a p90 differ). A type the scenario does not name publishes nothing, as a job whose role cannot
publish, or one read before its first minute. Only ``MetricStat`` queries are answered (no math expressions).
CloudWatch's clients speak AWS JSON 1.0 (botocore 1.42 and later) or the query protocol (``query_protocol``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sm_prefs_devkit.emulator.errors import UnknownOperationException, ValidationException, shorten
from sm_prefs_devkit.emulator.service_model import to_epoch

if TYPE_CHECKING:
    from sm_prefs_devkit.emulator.engine import Engine
    from sm_prefs_devkit.emulator.scenario import Utilization
    from sm_prefs_devkit.emulator.service import Backends

TARGET_PREFIX = "GraniteServiceVersion20100801"
SERVICE = "cloudwatch"
KNOWN = ("GetMetricData",)
WRITES: tuple[str, ...] = ()
# AWS's names, stated here: the emulator imports nothing of the package it stands in for (test_independence).
NAMESPACES = {"/aws/sagemaker/TrainingJobs": "training", "/aws/sagemaker/ProcessingJobs": "processing"}
GPU_METRICS = ("GPUUtilization", "GPUMemoryUtilization")
CPU_METRICS = ("CPUUtilization",)
METRICS = (*GPU_METRICS, *CPU_METRICS, "MemoryUtilization")
PUBLISHED_EVERY = 60.0
MAX_QUERIES = 500  # CloudWatch's limit per GetMetricData call
SPREAD = 4  # points above or below the scenario's figure


def answer(backends: Backends, operation: str, request: dict[str, Any], region: str) -> dict[str, Any]:
    if operation != "GetMetricData":
        raise UnknownOperationException(f"CloudWatch {shorten(operation)} is not served by the emulator")
    queries = request["MetricDataQueries"]
    if len(queries) > MAX_QUERIES:
        raise ValidationException(f"at most {MAX_QUERIES} MetricDataQueries per call")
    start, end = to_epoch(request["StartTime"]), to_epoch(request["EndTime"])
    newest_first = request.get("ScanBy", "TimestampDescending") == "TimestampDescending"
    engine = backends.engine
    with engine.lock:
        results = [_result(engine, query, start, end, region, newest_first) for query in queries]
    return {"MetricDataResults": results, "Messages": []}


def _result(
    engine: Engine, query: dict[str, Any], start: float, end: float, region: str, newest_first: bool
) -> dict[str, Any]:
    stat = query.get("MetricStat")
    if stat is None:
        raise ValidationException("the emulator answers MetricStat queries only, not expressions")
    metric = stat["Metric"]
    host = next((d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == "Host"), "")
    points = _points(engine, NAMESPACES.get(metric.get("Namespace", "")), metric["MetricName"], host, region)
    period = max(PUBLISHED_EVERY, float(stat["Period"]))
    # Each period's average of the values published in it, as CloudWatch's Average statistic; periods fall on
    # whole multiples of their length since the epoch, as CloudWatch's do (a 60 s period starts on the minute).
    buckets: dict[float, list[float]] = {}
    for at, value in points:
        if start <= at < end:
            buckets.setdefault(at // period * period, []).append(value)
    times = sorted(buckets, reverse=newest_first)
    return {
        "Id": query["Id"],
        "Label": query.get("Label") or metric["MetricName"],
        "Timestamps": times,  # epoch seconds, as AWS JSON carries timestamps
        "Values": [round(sum(buckets[t]) / len(buckets[t]), 3) for t in times],
        "StatusCode": "Complete",
    }


def _points(engine: Engine, kind: str | None, metric: str, host: str, region: str) -> list[tuple[float, float]]:
    """What the job's host published of ``metric``: (time, value) once a minute while it ran."""
    job_name, _, number = host.rpartition("/algo-")
    if kind is None or metric not in METRICS or not number.isdigit():
        return []
    job = engine.job(kind, job_name, region)
    if job is None or job.selected is None or job.start_time is None:
        return []
    usage = engine.scenario.utilization.get(job.selected["instance_type"])
    index = int(number)
    if usage is None or not 1 <= index <= job.selected["count"]:
        return []
    devices = usage.gpus if metric in GPU_METRICS else usage.vcpus if metric in CPU_METRICS else 1
    if devices == 0:
        return []  # an instance without GPUs publishes no GPU metrics
    ran_until = job.end_time if job.end_time is not None else engine.clock.now()
    points = []
    minute = 1
    while job.start_time + minute * PUBLISHED_EVERY <= ran_until:
        points.append((job.start_time + minute * PUBLISHED_EVERY, _value(usage, metric, index, minute) * devices))
        minute += 1
    return points


def _value(usage: Utilization, metric: str, host: int, minute: int) -> float:
    spread = (host * 7 + minute * 3) % (2 * SPREAD + 1) - SPREAD
    return float(min(100.0, max(0.0, float(getattr(usage, metric)) + spread)))
