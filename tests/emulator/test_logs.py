"""CloudWatch Logs on the emulator's endpoint: what jobs write, and the API clients read it with."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.emulator import service_model
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, processing_request, training_request

pytestmark = pytest.mark.emulator
GROUP = "/aws/sagemaker/TrainingJobs"


def _run_jobs(server, *names: str) -> None:
    client = boto_client(server.endpoint_url)
    for name in names:
        client.create_training_job(**training_request(name, GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 10_000})


def _strip(response: dict) -> dict:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def test_a_queued_job_has_no_group_or_stream(start_emulator):
    server = start_emulator("all-busy-then-free")
    boto_client(server.endpoint_url).create_training_job(**training_request("queued", GPU_PAIR))
    logs = boto_client(server.endpoint_url, service="logs")
    assert logs.describe_log_groups()["logGroups"] == []
    with pytest.raises(ClientError) as missing:
        logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="queued/")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_each_instance_has_a_stream_named_as_sagemaker_names_it(start_emulator):
    server = start_emulator("gpu-shortage")  # falls back to 2 x ml.p4d.24xlarge
    _run_jobs(server, "two-hosts")
    logs = boto_client(server.endpoint_url, service="logs")
    streams = logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="two-hosts/")
    names = [s["logStreamName"] for s in streams["logStreams"]]
    start = int(
        boto_client(server.endpoint_url)
        .describe_training_job(TrainingJobName="two-hosts")["TrainingStartTime"]
        .timestamp()
    )
    assert names == [f"two-hosts/algo-1-{start}", f"two-hosts/algo-2-{start}"]
    assert not service_model.response_violations("DescribeLogStreams", _strip(streams), "logs")


def test_lines_follow_the_phases_and_the_first_host_reports_progress(start_emulator):
    server = start_emulator("gpu-shortage")
    _run_jobs(server, "phased")
    logs = boto_client(server.endpoint_url, service="logs")
    first, second = (
        s["logStreamName"]
        for s in logs.describe_log_streams(logGroupName=GROUP, logStreamNamePrefix="phased/")["logStreams"]
    )
    events = logs.get_log_events(logGroupName=GROUP, logStreamName=first, startFromHead=True)
    assert not service_model.response_violations("GetLogEvents", _strip(events), "logs")
    messages = [e["message"] for e in events["events"]]
    assert messages[0] == "Started on 2 x ml.p4d.24xlarge"
    assert [m for m in messages if m.startswith("epoch")] == [
        f"epoch {i}/5: loss={2 / (i + 1):.4f}" for i in range(1, 6)
    ]
    assert messages[-2:] == ["Uploading generated training model", "Training job completed"]
    timestamps = [e["timestamp"] for e in events["events"]]
    assert timestamps == sorted(timestamps)
    other = [e["message"] for e in logs.get_log_events(logGroupName=GROUP, logStreamName=second)["events"]]
    assert not [m for m in other if m.startswith("epoch")] and other[-1] == "Training job completed"


def test_a_failing_job_writes_the_scenarios_lines_then_its_reason(start_emulator):
    server = start_emulator("incompatible-fallback")
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
    ]
    boto_client(server.endpoint_url).create_training_job(**training_request("cuda", preferences))
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    logs = boto_client(server.endpoint_url, service="logs")
    events = logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix="cuda/")["events"]
    messages = [e["message"] for e in events]
    assert "RuntimeError: CUDA error: no kernel image is available for execution on the device" in messages
    assert messages[-1].startswith("Training job failed. Reason: AlgorithmError: CUDA error")


def test_get_log_events_tokens_move_forward_and_stand_still_at_the_end(start_emulator):
    server = start_emulator("ample")
    _run_jobs(server, "paged")
    logs = boto_client(server.endpoint_url, service="logs")
    (stream,) = (s["logStreamName"] for s in logs.describe_log_streams(logGroupName=GROUP)["logStreams"])
    whole = [
        e["message"]
        for e in logs.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]
    ]
    read: list[str] = []
    token = None
    while True:
        kwargs = {"nextToken": token} if token else {"startFromHead": True}
        page = logs.get_log_events(logGroupName=GROUP, logStreamName=stream, limit=3, **kwargs)
        read += [e["message"] for e in page["events"]]
        if page["nextForwardToken"] == token:
            break
        token = page["nextForwardToken"]
    assert read == whole
    latest = logs.get_log_events(logGroupName=GROUP, logStreamName=stream, limit=2)["events"]
    assert [e["message"] for e in latest] == whole[-2:], "without startFromHead: the newest events"
    with pytest.raises(ClientError) as wrong:
        logs.get_log_events(logGroupName=GROUP, logStreamName=stream, nextToken="f/not-a-token")
    assert wrong.value.response["Error"]["Code"] == "InvalidParameterException"


def test_filter_log_events_pages_across_streams_and_binds_its_token(start_emulator):
    server = start_emulator("gpu-shortage")
    _run_jobs(server, "filtered", "other")
    logs = boto_client(server.endpoint_url, service="logs")
    pages = list(
        logs.get_paginator("filter_log_events").paginate(
            logGroupName=GROUP, logStreamNamePrefix="filtered/", PaginationConfig={"PageSize": 4}
        )
    )
    events = [e for page in pages for e in page["events"]]
    assert len(pages) > 2 and all(e["logStreamName"].startswith("filtered/") for e in events)
    assert len({e["eventId"] for e in events}) == len(events)
    assert [e["timestamp"] for e in events] == sorted(e["timestamp"] for e in events)
    assert not service_model.response_violations("FilterLogEvents", _strip(pages[0]), "logs")
    first = logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix="filtered/", limit=4)
    with pytest.raises(ClientError) as foreign:
        logs.filter_log_events(logGroupName=GROUP, logStreamNamePrefix="other/", nextToken=first["nextToken"])
    assert foreign.value.response["Error"]["Code"] == "InvalidParameterException"
    later = logs.filter_log_events(
        logGroupName=GROUP, logStreamNamePrefix="filtered/", startTime=events[-1]["timestamp"]
    )
    assert [e["eventId"] for e in later["events"]] == [
        e["eventId"] for e in events if e["timestamp"] == events[-1]["timestamp"]
    ]


def test_filter_patterns_are_refused_not_ignored(start_emulator):
    server = start_emulator("ample")
    _run_jobs(server, "patterned")
    logs = boto_client(server.endpoint_url, service="logs")
    with pytest.raises(ClientError) as refused:
        logs.filter_log_events(logGroupName=GROUP, filterPattern="ERROR")
    assert refused.value.response["Error"]["Code"] == "InvalidParameterException"


def test_processing_jobs_log_to_their_own_group(start_emulator):
    server = start_emulator("ample")
    boto_client(server.endpoint_url).create_processing_job(
        **processing_request("prep", [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1)
    )
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    logs = boto_client(server.endpoint_url, service="logs")
    assert [g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]] == ["/aws/sagemaker/ProcessingJobs"]
    events = logs.filter_log_events(logGroupName="/aws/sagemaker/ProcessingJobs", logStreamNamePrefix="prep/")["events"]
    assert events[-1]["message"] == "Processing job completed"
    assert any(e["message"] == "processed 100% of the input" for e in events)


def test_logs_are_per_region_like_jobs(start_emulator):
    server = start_emulator("ample")
    _run_jobs(server, "east")
    west = boto_client(server.endpoint_url, service="logs", region="eu-west-1")
    assert west.describe_log_groups()["logGroups"] == []


def test_wrong_types_and_unknown_operations_answer_like_aws(start_emulator):
    server = start_emulator("ample")
    logs = boto_client(server.endpoint_url, validate=False, service="logs")
    with pytest.raises(ClientError) as wrong:
        logs.filter_log_events(logGroupName=GROUP, limit="many")
    assert wrong.value.response["Error"]["Code"] == "SerializationException"
    with pytest.raises(ClientError) as unknown:
        logs.start_query(logGroupName=GROUP, startTime=0, endTime=1, queryString="fields @message")
    assert unknown.value.response["Error"]["Code"] == "UnknownOperationException"


def test_the_jobs_groups_are_the_jobs_own(start_emulator):
    server = start_emulator("ample")
    _run_jobs(server, "written")
    logs = boto_client(server.endpoint_url, service="logs")
    with pytest.raises(ClientError) as refused:
        logs.put_log_events(logGroupName=GROUP, logStreamName="x", logEvents=[{"timestamp": 1, "message": "m"}])
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert GROUP in refused.value.response["Error"]["Message"]


def test_without_moto_a_group_other_than_the_jobs_does_not_exist():
    from sm_prefs_devkit.emulator import logs

    request = {"logGroupName": "airflow-task-logs", "logStreamName": "x"}
    with pytest.raises(logs.ResourceNotFoundException, match=r"need moto: pip install 'moto\[s3\]'"):
        logs.call("GetLogEvents", request, [], "123456789012", "us-east-1", log_groups=None)


# What Airflow's CloudWatch remote logging does with a group of its own: create it and one stream per task try,
# put the task's lines, read them back for the UI.
TASK_LOGS = "airflow-task-logs"
TRY_STREAM = "dag_id=nightly/run_id=manual__2026-12-02T01_00_00+00_00/task_id=fine_tune/attempt=1.log"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _write_task_log(logs, *messages: str) -> None:
    logs.create_log_group(logGroupName=TASK_LOGS)
    logs.create_log_stream(logGroupName=TASK_LOGS, logStreamName=TRY_STREAM)
    start = _now_ms()
    logs.put_log_events(
        logGroupName=TASK_LOGS,
        logStreamName=TRY_STREAM,
        logEvents=[{"timestamp": start + i, "message": message} for i, message in enumerate(messages)],
    )


def _task_log(logs) -> list[str]:
    events = logs.get_log_events(logGroupName=TASK_LOGS, logStreamName=TRY_STREAM, startFromHead=True)["events"]
    return [event["message"] for event in events]


def test_a_group_of_the_clients_own_is_written_and_read_as_cloudwatch_does(start_emulator):
    server = start_emulator("ample")
    _run_jobs(server, "beside")
    logs = boto_client(server.endpoint_url, service="logs")
    _write_task_log(logs, "first line", "second line")
    assert _task_log(logs) == ["first line", "second line"]
    described = logs.describe_log_groups()
    assert [group["logGroupName"] for group in described["logGroups"]] == sorted([GROUP, TASK_LOGS])
    assert not service_model.response_violations("DescribeLogGroups", _strip(described), "logs")
    assert not service_model.response_violations(
        "GetLogEvents", _strip(logs.get_log_events(logGroupName=TASK_LOGS, logStreamName=TRY_STREAM)), "logs"
    )
    assert [g["logGroupName"] for g in logs.describe_log_groups(logGroupNamePrefix="airflow")["logGroups"]] == [
        TASK_LOGS
    ]
    streams = logs.describe_log_streams(logGroupName=TASK_LOGS)["logStreams"]
    assert [stream["logStreamName"] for stream in streams] == [TRY_STREAM]
    # CloudWatch's own errors, as a client meets them.
    with pytest.raises(ClientError) as again:
        logs.create_log_group(logGroupName=TASK_LOGS)
    assert again.value.response["Error"]["Code"] == "ResourceAlreadyExistsException"
    with pytest.raises(ClientError) as missing:
        logs.get_log_events(logGroupName=TASK_LOGS, logStreamName="attempt=2.log")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as no_group:
        logs.get_log_events(logGroupName="never-created", logStreamName="s")
    assert no_group.value.response["Error"]["Code"] == "ResourceNotFoundException"
    # Per Region, like the jobs' groups.
    west = boto_client(server.endpoint_url, service="logs", region="eu-west-1")
    assert west.describe_log_groups()["logGroups"] == []


def test_a_clients_log_write_is_kept_at_once_and_rewrites_neither_jobs_nor_objects(start_emulator, tmp_path):
    """Airflow puts task log lines often: each is on disk when the call returns (an emulator killed next keeps
    it), and costs only the log groups' file."""
    state = tmp_path / "state.json"
    server = start_emulator("ample", state_file=state)
    _run_jobs(server, "beside")
    s3 = boto_client(server.endpoint_url, service="s3")
    s3.put_object(Bucket="sm-prefs-demo", Key="kept", Body=b"object")
    objects = tmp_path / "state.json.s3"
    before = {path: (path.stat().st_ino, path.stat().st_mtime_ns) for path in (state, objects)}  # replaced whole
    _write_task_log(boto_client(server.endpoint_url, service="logs"), "kept at once")
    assert "kept at once" in (tmp_path / "state.json.logs").read_text()
    assert {path: (path.stat().st_ino, path.stat().st_mtime_ns) for path in (state, objects)} == before


def test_a_restarted_emulator_keeps_the_clients_groups_and_a_fresh_one_has_none(start_emulator, tmp_path):
    state = tmp_path / "state.json"
    first = start_emulator("ample", state_file=state)
    _write_task_log(boto_client(first.endpoint_url, service="logs"), "before the restart")
    first.stop()
    assert (tmp_path / "state.json.logs").exists()
    second = start_emulator("ample", state_file=state)
    logs = boto_client(second.endpoint_url, service="logs")
    assert _task_log(logs) == ["before the restart"]
    logs.put_log_events(
        logGroupName=TASK_LOGS, logStreamName=TRY_STREAM, logEvents=[{"timestamp": _now_ms(), "message": "after"}]
    )
    assert _task_log(logs) == ["before the restart", "after"]
    second.stop()
    fresh = start_emulator("ample")
    assert boto_client(fresh.endpoint_url, service="logs").describe_log_groups()["logGroups"] == []


def test_a_container_that_prints_its_environment_logs_each_entry_once(start_emulator, tmp_path):
    """echo_environment: the rehearsal for secrets a job echoes (off by default)."""
    scenario = tmp_path / "echo.yaml"
    scenario.write_text("default_capacity: 8\necho_environment: true\n")
    for source, echoes in ((str(scenario), True), ("gpu-shortage", False)):
        server = start_emulator(source)
        request = training_request("echoing", GPU_PAIR)
        request["Environment"] = {"STAGE": "nightly", "API_KEY": "k-1"}
        boto_client(server.endpoint_url).create_training_job(**request)
        control(server.endpoint_url, "advance", {"seconds": 10_000})
        events = boto_client(server.endpoint_url, service="logs").filter_log_events(logGroupName=GROUP)["events"]
        env_lines = [e["message"] for e in events if e["message"].startswith("env ")]
        assert env_lines == (["env API_KEY=k-1", "env STAGE=nightly"] if echoes else []), source
