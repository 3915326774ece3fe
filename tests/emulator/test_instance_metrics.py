"""CloudWatch's GetMetricData on the emulator, through unmodified clients: AWS JSON 1.0 (botocore 1.42 and
later) and the query protocol older clients speak (MWAA 3.1's botocore), both from botocore's own code."""

from __future__ import annotations

import datetime as dt
import urllib.parse
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.emulator.scenario import parse_faults
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, training_request

pytestmark = pytest.mark.emulator


def _clients(server: Any) -> tuple[Any, Any]:
    kw = {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"}
    kw |= {"aws_access_key_id": "local", "aws_secret_access_key": "local"}
    return boto3.client("sagemaker", **kw), boto3.client("cloudwatch", **kw)


def _query(job: str, host: int, metric: str = "GPUUtilization") -> dict[str, Any]:
    return {
        "Id": f"h{host}",
        "MetricStat": {
            "Metric": {
                "Namespace": "/aws/sagemaker/TrainingJobs",
                "MetricName": metric,
                "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{host}"}],
            },
            "Period": 60,
            "Stat": "Average",
        },
    }


@pytest.fixture
def ended_job(start_emulator):
    """A job that ran ten virtual minutes on 2 x ml.p4d.24xlarge (8 GPUs each, 91 % in the scenario)."""
    server = start_emulator("gpu-shortage")
    sagemaker, cloudwatch = _clients(server)
    sagemaker.create_training_job(**training_request("busy", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 900})
    described = sagemaker.describe_training_job(TrainingJobName="busy")
    assert described["TrainingJobStatus"] == "Completed"
    return server, cloudwatch, described


def test_each_host_publishes_a_value_a_minute_of_its_run_as_percent_times_gpus(ended_job):
    server, cloudwatch, described = ended_job
    answer = cloudwatch.get_metric_data(
        MetricDataQueries=[_query("busy", 1), _query("busy", 2), _query("busy", 3)],
        StartTime=described["TrainingStartTime"],
        EndTime=described["TrainingEndTime"] + dt.timedelta(minutes=5),
    )
    first, second, third = answer["MetricDataResults"]
    run_minutes = int((described["TrainingEndTime"] - described["TrainingStartTime"]).total_seconds() // 60)
    assert len(first["Values"]) == len(second["Values"]) == run_minutes
    assert all(91 - 4 <= value / 8 <= 91 + 4 for value in first["Values"] + second["Values"])
    assert first["Timestamps"] == sorted(first["Timestamps"], reverse=True)  # newest first, as CloudWatch
    assert {(t.second, t.microsecond) for t in first["Timestamps"]} == {(0, 0)}  # periods start on the minute
    assert third["Values"] == []  # the job has two hosts
    assert server.engine.calls["GraniteServiceVersion20100801.GetMetricData"] == 1


def test_a_type_the_scenario_does_not_name_publishes_nothing_and_a_denied_role_is_refused(ended_job):
    server, cloudwatch, described = ended_job
    window = {"StartTime": described["TrainingStartTime"], "EndTime": described["TrainingEndTime"]}
    (result,) = cloudwatch.get_metric_data(MetricDataQueries=[_query("no-such-job", 1)], **window)["MetricDataResults"]
    assert result["Values"] == [] and result["StatusCode"] == "Complete"
    server.emulator.faults = parse_faults({"deny": ["GetMetricData"]})
    with pytest.raises(ClientError, match="AccessDenied"):
        cloudwatch.get_metric_data(MetricDataQueries=[_query("busy", 1)], **window)


def test_the_query_protocol_answers_the_same_figures(ended_job):
    """botocore's own query serializer and parser, as MWAA 3.1's botocore (1.41) uses them for CloudWatch."""
    from botocore import parsers, serialize
    from botocore.session import get_session

    server, cloudwatch, described = ended_job
    operation = get_session().get_service_model("cloudwatch").operation_model("GetMetricData")
    arguments = {
        "MetricDataQueries": [_query("busy", 1)],
        "StartTime": described["TrainingStartTime"],
        "EndTime": described["TrainingEndTime"] + dt.timedelta(minutes=5),
    }
    request = serialize.create_serializer("query").serialize_to_request(arguments, operation)
    sent = urllib.request.Request(
        server.endpoint_url + "/",
        data=urllib.parse.urlencode(request["body"]).encode(),  # botocore's AWSRequest encodes the form so
        headers={
            **request["headers"],
            "Authorization": "AWS4-HMAC-SHA256 Credential=local/x/us-east-1/monitoring/aws4_request",
        },
        method="POST",
    )
    with urllib.request.urlopen(sent, timeout=10) as reply:
        body, status, headers = reply.read(), reply.status, dict(reply.headers)
    parsed = parsers.create_parser("query").parse(
        {"body": body, "status_code": status, "headers": headers}, operation.output_shape
    )
    (by_query,) = parsed["MetricDataResults"]
    (by_json,) = cloudwatch.get_metric_data(**arguments)["MetricDataResults"]
    assert by_query["Values"] == by_json["Values"] and len(by_query["Values"]) >= 9
    assert by_query["Timestamps"] == by_json["Timestamps"]
