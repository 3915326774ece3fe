"""The CloudWatch read of a job's host metrics, against a fake client: what it asks for, how long it pages, what
its failures say."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.sagemaker import host_metrics

STARTED = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)
ENDED = STARTED + dt.timedelta(minutes=10)


class FakeCloudWatch:
    def __init__(self, pages: int = 1, error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.pages, self.error = pages, error

    def get_metric_data(self, **arguments: Any) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        self.calls.append(arguments)
        results = [{"Id": q["Id"], "Values": [float(len(self.calls))]} for q in arguments["MetricDataQueries"]]
        more = {"NextToken": f"page-{len(self.calls)}"} if len(self.calls) < self.pages else {}
        return {"MetricDataResults": results, **more}


def test_one_query_per_metric_and_host_over_the_run_and_the_publishing_lag():
    fake = FakeCloudWatch()
    values = host_metrics.read(fake, kind=PROCESSING, job_name="prep", hosts=2, started=STARTED, ended=ENDED)
    (call,) = fake.calls
    assert (call["StartTime"], call["EndTime"]) == (STARTED, ENDED + dt.timedelta(minutes=5))
    assert [q["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for q in call["MetricDataQueries"]] == [
        "prep/algo-1",
        "prep/algo-2",
    ] * 4
    assert {q["MetricStat"]["Metric"]["Namespace"] for q in call["MetricDataQueries"]} == {
        "/aws/sagemaker/ProcessingJobs"
    }
    assert {(q["MetricStat"]["Period"], q["MetricStat"]["Stat"]) for q in call["MetricDataQueries"]} == {
        (60, "Average")
    }
    assert values == {metric: [[1.0], [1.0]] for metric in host_metrics.METRICS}


def test_pages_are_followed_and_bounded():
    fake = FakeCloudWatch(pages=3)
    values = host_metrics.read(fake, kind=TRAINING, job_name="big", hosts=1, started=STARTED, ended=ENDED)
    assert len(fake.calls) == 3 and fake.calls[2]["NextToken"] == "page-2"
    assert values["GPUUtilization"] == [[1.0, 2.0, 3.0]]
    endless = FakeCloudWatch(pages=1_000)
    host_metrics.read(endless, kind=TRAINING, job_name="big", hosts=1, started=STARTED, ended=ENDED)
    assert len(endless.calls) == host_metrics.MAX_PAGES == 5


def test_a_job_past_the_calls_limit_is_read_on_its_first_hosts():
    fake = FakeCloudWatch()
    values = host_metrics.read(fake, kind=TRAINING, job_name="huge", hosts=400, started=STARTED, ended=ENDED)
    assert len(fake.calls[0]["MetricDataQueries"]) == 500 and len(values["CPUUtilization"]) == 125


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetMetricData"),
            "CloudWatch refused GetMetricData (AccessDenied): check that the connection's role may call "
            "cloudwatch:GetMetricData (deploy/iam-policy.json)",
        ),
        (
            EndpointConnectionError(endpoint_url="https://monitoring.us-east-1.amazonaws.com"),
            "CloudWatch did not answer GetMetricData: Could not connect to the endpoint URL: "
            '"https://monitoring.us-east-1.amazonaws.com"',
        ),
    ],
)
def test_a_failure_is_one_line_naming_what_to_check(error, said):
    with pytest.raises(host_metrics.MetricsUnreadable) as raised:
        host_metrics.read(
            FakeCloudWatch(error=error), kind=TRAINING, job_name="j", hosts=1, started=STARTED, ended=ENDED
        )
    assert str(raised.value) == said


def test_the_client_keeps_the_connection_and_adds_short_deadlines(monkeypatch):
    seen: dict[str, Any] = {}

    class Hook:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)
            self.conn = "client"

    monkeypatch.setattr("airflow.providers.amazon.aws.hooks.base_aws.AwsBaseHook", Hook)
    from airflow_sm_prefs.sagemaker.connection import Connection

    connection = Connection("team", "eu-west-1", None, {"user_agent": "x"})
    assert host_metrics.client(connection) == "client"
    assert seen["client_type"] == "cloudwatch" and seen["aws_conn_id"] == "team"
    assert seen["config"] == {"user_agent": "x", **host_metrics.CALL_CONFIG}
    assert host_metrics.CALL_CONFIG["read_timeout"] == 10 and host_metrics.CALL_CONFIG["connect_timeout"] == 5
