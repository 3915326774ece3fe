"""The job's CloudWatch log in the task log: the deferred wait's shared follower, against the emulator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_sm_prefs.wait.log_follower import LogCursor, LogFollower
from airflow_sm_prefs.wait.log_stream import CURSOR_XCOM_KEY
from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger
from airflow_sm_prefs.wait.watcher import JobWatcher
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, TaskLog, boto_client, training_request

pytestmark = pytest.mark.emulator
# A job's life in about two seconds: 60 s startup, 10 s download, 300 s run, 10 s upload at 200x.
FAST = "speed: 200\ndefault_capacity: 8\n"


@pytest.fixture(autouse=True)
async def _close_shared_readers():
    yield
    await JobWatcher.close_all()
    await LogFollower.close_all()


def _trigger(conn_id: str, name: str, task_log: TaskLog, **kwargs) -> SageMakerPreferenceJobTrigger:
    trigger = SageMakerPreferenceJobTrigger(
        job_name=name,
        job_kind="training",
        hook_kwargs={"aws_conn_id": conn_id, "region_name": "us-east-1"},
        poll_interval=0.2,
        stream_logs=True,
        **kwargs,
    )
    trigger._log = task_log  # type: ignore[assignment]
    return trigger


def _scenario(tmp_path, extra: str = "") -> str:
    path = tmp_path / "fast.yaml"
    path.write_text(FAST + extra)
    return str(path)


async def _run(trigger: SageMakerPreferenceJobTrigger, timeout: float = 60.0) -> dict:
    event = await asyncio.wait_for(trigger.run().__anext__(), timeout)
    return event.payload


async def test_every_line_appears_once_in_order_with_its_stream(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path))
    boto_client(server.endpoint_url).create_training_job(**training_request("logged", GPU_PAIR))
    task_log = TaskLog()
    payload = await _run(_trigger(aws_connection(server), "logged", task_log))
    assert payload["status"] == "finished"
    logs = boto_client(server.endpoint_url, service="logs")
    pages = logs.get_paginator("filter_log_events").paginate(
        logGroupName="/aws/sagemaker/TrainingJobs", logStreamNamePrefix="logged/"
    )
    written = [f"[{e['logStreamName']}] {e['message']}" for page in pages for e in page["events"]]
    assert task_log.lines == written, "every line the job wrote, in order, none twice"
    assert any("epoch 5/5" in line for line in written) and written[-1].endswith("Training job completed")


async def test_a_trigger_started_again_in_the_same_try_repeats_nothing(
    start_emulator, aws_connection, tmp_path, monkeypatch
):
    """A triggerer restart: the second trigger reads the cursor the first one saved (XCom) and goes on."""
    saved: dict[str, object] = {}

    class FakeXCom:  # the Task SDK's synchronous calls, which supervisor_calls makes on every line
        @staticmethod
        def set(key, value, **scope):
            saved[key] = value

        @staticmethod
        def get_one(*, key, **scope):
            return saved.get(key)

    import airflow.sdk.execution_time.xcom as xcom_module

    monkeypatch.setattr(xcom_module, "XCom", FakeXCom)
    ti = type("TI", (), {"dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1})()
    server = start_emulator(_scenario(tmp_path, "runtime_seconds: {default: 1200}\n"), clock_stopped=True)
    boto_client(server.endpoint_url).create_training_job(**training_request("restarted", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 600})  # started, two epochs logged, far from its end
    conn_id = aws_connection(server)
    task_log = TaskLog()

    first = _trigger(conn_id, "restarted", task_log)
    first.task_instance = ti
    run = asyncio.ensure_future(first.run().__anext__())
    while len(task_log.lines) < 4:  # some lines shown, the job still running
        await asyncio.sleep(0.05)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    await LogFollower.close_all()
    before = len(task_log.lines)
    assert CURSOR_XCOM_KEY in saved
    control(server.endpoint_url, "advance", {"seconds": 5000})  # the job goes on to its end while no trigger runs
    second = _trigger(conn_id, "restarted", task_log)
    second.task_instance = ti
    assert (await _run(second))["status"] == "finished"
    assert len(task_log.lines) > before, "the second trigger showed the rest"
    assert len(task_log.lines) == len(set(task_log.lines)), "no line twice across the restart"
    assert task_log.lines[-1].endswith("Training job completed")


async def test_a_retry_that_reattaches_starts_from_its_cursor(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path))
    boto_client(server.endpoint_url).create_training_job(**training_request("reattached", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 200})  # started, some epochs logged
    now = control(server.endpoint_url, "health")["virtual_time"]
    task_log = TaskLog()
    cursor = LogCursor(after=int(now) * 1000).to_json()
    await _run(_trigger(aws_connection(server), "reattached", task_log, log_cursor=cursor))
    assert task_log.lines and not any("Started on" in line for line in task_log.lines), "earlier lines skipped"


async def test_queued_jobs_cost_no_log_calls(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, "capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 0}\n"))
    client = boto_client(server.endpoint_url)
    conn_id = aws_connection(server)
    runs = []
    for index in range(20):
        client.create_training_job(**training_request(f"queued-{index}", GPU_PAIR))
        runs.append(asyncio.ensure_future(_trigger(conn_id, f"queued-{index}", TaskLog()).run().__anext__()))
    # Until every job was looked at, however long a busy machine takes (a fixed 3 s could pass before any was).
    deadline = asyncio.get_running_loop().time() + 120
    while server.engine.calls["DescribeTrainingJob"] < 20 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    for run in runs:
        run.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    assert server.engine.calls["DescribeTrainingJob"] >= 20, "every job was watched"
    assert not [name for name in server.engine.calls if name.startswith("Logs_")]


async def test_without_logs_permission_it_says_so_once_and_carries_on(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, "faults: {deny: [FilterLogEvents]}\n"))
    boto_client(server.endpoint_url).create_training_job(**training_request("denied", GPU_PAIR))
    task_log = TaskLog()
    payload = await _run(_trigger(aws_connection(server), "denied", task_log))
    assert payload["status"] == "finished"
    warnings = [m for m in task_log.messages if "cannot read CloudWatch Logs" in m]
    assert len(warnings) == 1 and "AccessDeniedException" in warnings[0]
    assert not task_log.lines


async def test_throttled_log_reads_back_off_and_still_show_every_line(start_emulator, aws_connection, tmp_path):
    server = start_emulator(_scenario(tmp_path, "seed: 3\n"))
    boto_client(server.endpoint_url).create_training_job(**training_request("throttled", GPU_PAIR))
    control(server.endpoint_url, "faults", {"throttle_rate": 0.4})
    task_log = TaskLog()
    payload = await _run(_trigger(aws_connection(server), "throttled", task_log), timeout=120)
    control(server.endpoint_url, "faults", {})
    assert payload["status"] == "finished"
    assert len(task_log.lines) == len(set(task_log.lines))
    assert task_log.lines[-1].endswith("Training job completed")


@dataclass(frozen=True)
class EchoedSecret:
    """A secret a task's templates read, planted where Airflow finds it, and the job's line that echoes it."""

    env: str  # where Airflow reads it: AIRFLOW_VAR_* or AIRFLOW_CONN_*
    stored: Callable[[str], str]  # the environment value holding the secret
    echo: Callable[[str], str]  # the job's log line that prints it
    told: dict[str, Any]  # the trigger's argument naming what the worker read


ECHOED_SECRETS = {
    # A Variable: the trigger reads it again by name (``mask_variables``).
    "variable": EchoedSecret(
        "AIRFLOW_VAR_SM_PREFS_API_TOKEN",
        lambda value: value,
        lambda value: f"export API_TOKEN={value}",
        {"mask_variables": [["sm_prefs_api_token", False]]},
    ),
    # A connection's password (``{{ conn.registry.password }}``): read again by id (``mask_connections``).
    "connection": EchoedSecret(
        "AIRFLOW_CONN_SM_PREFS_REGISTRY",
        lambda value: json.dumps({"conn_type": "generic", "login": "ci", "password": value}),
        lambda value: f"docker login -p {value} registry.example.com",
        {"mask_connections": ["sm_prefs_registry"]},
    ),
}


@pytest.mark.parametrize("kind", list(ECHOED_SECRETS))
async def test_a_secret_the_templates_read_is_masked_in_the_lines_the_triggerer_shows(
    start_emulator, aws_connection, tmp_path, monkeypatch, kind
):
    """The worker masks a Variable or a connection's password its templates read; the triggerer never read
    it, so the trigger reads it again (by name) and the job's lines that echo it show ``***``. Without the
    name, the line is in clear: the test plants a value that would be shown."""
    import secrets

    secret = ECHOED_SECRETS[kind]
    value = f"sm-secret-{secrets.token_hex(8)}"
    monkeypatch.setenv(secret.env, secret.stored(value))
    failing = (
        "failures:\n  - instance_type: ml.p5.48xlarge\n    after_seconds: 30\n"
        "    reason: 'AlgorithmError: login refused (exit code 1)'\n"
        f"    log_lines: [{json.dumps(secret.echo(value))}, 'giving up']\n"
    )
    server = start_emulator(_scenario(tmp_path, failing))
    conn_id = aws_connection(server)
    before, _, after = secret.echo("\0").partition("\0")
    for name, told in (("echoes-in-clear", {}), ("echoes-masked", secret.told)):
        boto_client(server.endpoint_url).create_training_job(**training_request(name, GPU_PAIR))
        task_log = TaskLog()
        payload = await _run(_trigger(conn_id, name, task_log, **told))
        assert payload["status"] == "finished" and payload["description"]["TrainingJobStatus"] == "Failed"
        echoed = [line for line in task_log.lines if before in line]
        assert len(echoed) == 1, task_log.lines
        if told:
            assert value not in echoed[0] and echoed[0].endswith(f"{before}***{after}")
            assert value not in repr(payload), "the event kept while deferred is masked too"
        else:
            assert value in echoed[0], "the triggerer only masks what it was told"
