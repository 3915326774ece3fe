"""Task logs in CloudWatch: where a trigger puts its job's lines (the try's own stream), against the emulator."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from airflow_sm_prefs.wait.cloudwatch_task_log import LOGGER_NAME, TryStream, batches, group_of, try_stream
from airflow_sm_prefs.wait.log_follower import LogBatch, LogFollower, LogLine
from airflow_sm_prefs.wait.log_stream import TriggerLogStream
from tests.helpers import TaskLog, boto_client

GROUP = "airflow-task-logs"
ARN = f"arn:aws:logs:eu-west-1:123456789012:log-group:{GROUP}"


def _ti(**changes: object) -> SimpleNamespace:
    values = {
        "dag_id": "nightly",
        "run_id": "manual__2026-12-02T01:00:00+00:00",
        "task_id": "train",
        "map_index": -1,
        "try_number": 2,
    }
    return SimpleNamespace(**{**values, **changes})


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (f"cloudwatch://{ARN}", (GROUP, "eu-west-1")),
        ("cloudwatch://arn:aws:logs:us-east-1:123456789012:log-group:/airflow/tasks", ("/airflow/tasks", "us-east-1")),
        ("s3://airflow-logs/logs", None),
        ("cloudwatch://not-an-arn", None),
        ("cloudwatch://arn:aws:logs:us-east-1:123456789012:log-group:", None),
        ("", None),
    ],
)
def test_the_group_and_region_come_from_the_setting_as_the_provider_reads_them(setting, expected):
    assert group_of(setting) == expected


def _remote_logging(monkeypatch: pytest.MonkeyPatch, folder: str, enabled: str = "True") -> None:
    monkeypatch.setenv("AIRFLOW__LOGGING__REMOTE_LOGGING", enabled)
    monkeypatch.setenv("AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER", folder)
    monkeypatch.setenv("AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID", "logs_conn")


def test_the_stream_is_the_one_the_worker_writes_and_the_reader_reads(monkeypatch):
    _remote_logging(monkeypatch, f"cloudwatch://{ARN}")
    target = try_stream(_ti())
    # Airflow's default log_filename_template, ":" replaced as the amazon provider replaces it.
    assert target == TryStream(
        GROUP,
        "eu-west-1",
        "dag_id=nightly/run_id=manual__2026-12-02T01_00_00+00_00/task_id=train/attempt=2.log",
        "logs_conn",
    )
    mapped = try_stream(_ti(map_index=3, try_number=1))
    assert mapped is not None and mapped.stream.endswith("/task_id=train/map_index=3/attempt=1.log")


def test_without_task_logs_in_cloudwatch_the_triggers_own_log_is_used(monkeypatch):
    _remote_logging(monkeypatch, "s3://airflow-logs/logs")
    assert try_stream(_ti()) is None
    _remote_logging(monkeypatch, f"cloudwatch://{ARN}", enabled="False")
    assert try_stream(_ti()) is None
    _remote_logging(monkeypatch, f"cloudwatch://{ARN}")
    assert try_stream(None) is None
    assert try_stream(_ti(run_id=None)) is None  # a trigger run outside a triggerer


def _events(server, stream: str) -> list[dict]:
    logs = boto_client(server.endpoint_url, service="logs")
    return logs.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]


@pytest.mark.emulator
async def test_lines_land_in_the_try_stream_in_the_json_the_reader_renders(start_emulator, aws_connection):
    server = start_emulator("ample")
    conn_id = aws_connection(server)
    boto_client(server.endpoint_url, service="logs").create_log_group(logGroupName=GROUP)
    target = TryStream(GROUP, "us-east-1", "dag_id=d/run_id=r/task_id=t/attempt=1.log", conn_id)
    # No stream yet (the try has logged nothing): it is created.
    await target.put(["[job/algo-1-1] first", "[job/algo-1-1] second"])
    await target.put(["[job/algo-1-1] gone quiet"], "warning")
    messages = [json.loads(event["message"]) for event in _events(server, target.stream)]
    assert messages == [
        {"event": "[job/algo-1-1] first", "level": "info", "logger": LOGGER_NAME},
        {"event": "[job/algo-1-1] second", "level": "info", "logger": LOGGER_NAME},
        {"event": "[job/algo-1-1] gone quiet", "level": "warning", "logger": LOGGER_NAME},
    ]


@pytest.mark.emulator
async def test_a_stream_that_cannot_be_written_leaves_the_lines_in_the_triggers_log(start_emulator, aws_connection):
    server = start_emulator("ample")
    # The group does not exist: CloudWatch refuses the stream, and the lines must not be lost.
    target = TryStream("no-such-group", "us-east-1", "attempt=1.log", aws_connection(server))
    task_log = TaskLog()
    stream = TriggerLogStream(
        "job", LogFollower.__new__(LogFollower), task_log=task_log, task_instance=None, try_stream=target
    )
    await stream.show(LogBatch(lines=(LogLine("job/algo-1-1", "kept", 1),)))
    await stream.show(LogBatch(lines=(LogLine("job/algo-1-1", "and kept", 2),)))
    assert "could not put the job's lines" in task_log.messages[0]
    assert task_log.messages[1:] == ["[job/algo-1-1] kept", "[job/algo-1-1] and kept"], "the warning once"


@pytest.mark.emulator
async def test_with_a_try_stream_the_triggers_own_log_gets_none_of_the_lines(start_emulator, aws_connection):
    server = start_emulator("ample")
    boto_client(server.endpoint_url, service="logs").create_log_group(logGroupName=GROUP)
    target = TryStream(GROUP, "us-east-1", "attempt=1.log", aws_connection(server))
    task_log = TaskLog()
    stream = TriggerLogStream(
        "job", LogFollower.__new__(LogFollower), task_log=task_log, task_instance=None, try_stream=target
    )
    await stream.show(LogBatch(lines=(LogLine("job/algo-1-1", "once", 1),)))
    await stream.show(LogBatch(unavailable="AccessDenied"))
    assert task_log.messages == []
    assert [json.loads(e["message"])["event"] for e in _events(server, "attempt=1.log")] == [
        "[job/algo-1-1] once",
        "SageMaker job job: AccessDenied",
    ]


def test_calls_stay_within_putlogevents_limits():
    assert batches([]) == []
    assert batches(["a", "b"]) == [["a", "b"]]
    # 10,000 events a call at most.
    many = batches(["x"] * 10_001)
    assert [len(batch) for batch in many] == [10_000, 1]
    # 1,048,576 bytes a call at most, counting 26 bytes an event and UTF-8 bytes, not characters.
    big = "é" * 262_131  # 524,262 bytes: with its 26, two fill a call exactly
    assert [len(batch) for batch in batches([big, big, big])] == [2, 1]
    assert [len(batch) for batch in batches([big + "é", big])] == [1, 1]


@pytest.mark.emulator
async def test_twenty_thousand_lines_land_in_the_try_stream_in_calls_the_service_takes(start_emulator, aws_connection):
    """The emulator counts a batch as CloudWatch documents it (messages' UTF-8 bytes + 26 an event), so
    ``batches`` and the service agree: a call at the limit is taken, one byte over is refused."""
    server = start_emulator("ample")
    logs = boto_client(server.endpoint_url, service="logs")
    logs.create_log_group(logGroupName=GROUP)
    target = TryStream(GROUP, "us-east-1", "attempt=1.log", aws_connection(server))
    lines = [f"[job/algo-1-1] step {n}: " + 'é"\\' * 20 for n in range(20_000)]
    await target.put(lines)
    described = logs.describe_log_streams(logGroupName=GROUP)["logStreams"]
    assert [s["logStreamName"] for s in described] == [target.stream]
    every = []
    token = None
    while True:
        page = logs.get_log_events(
            logGroupName=GROUP,
            logStreamName=target.stream,
            startFromHead=True,
            **({"nextToken": token} if token else {}),
        )
        if not page["events"] or page["nextForwardToken"] == token:
            break
        every += page["events"]
        token = page["nextForwardToken"]
    assert [json.loads(e["message"])["event"] for e in every] == lines

    at_limit = ["x" * (1_048_576 // 2 - 26)] * 2
    logs.put_log_events(
        logGroupName=GROUP, logStreamName=target.stream, logEvents=[{"timestamp": 1, "message": m} for m in at_limit]
    )
    over = [{"timestamp": 1, "message": m} for m in (at_limit[0] + "x", at_limit[1])]
    with pytest.raises(logs.exceptions.InvalidParameterException, match="Upload too large: 1048577 bytes"):
        logs.put_log_events(logGroupName=GROUP, logStreamName=target.stream, logEvents=over)
