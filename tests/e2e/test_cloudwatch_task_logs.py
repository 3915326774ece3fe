"""Task logs in CloudWatch (Airflow's remote logging, the MWAA default): the job's lines that the triggerer
streamed are in the task log the UI shows once the task has finished, each once.

Airflow's CloudWatch reader shows a try's own stream only, not its triggers' (apache/airflow#70317): the
trigger puts the job's lines in the try's stream (``cloudwatch_task_log``). The test also checks that the
trigger's own stream does not hold them, so a reader that learns to show both still shows each line once.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_prefs_devkit.local_stack import LocalStack, task_log_message, wait_for

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]

PROJECT = Path(__file__).resolve().parents[2]
# The secrets test's DAG (its Variable set to a plain value): a job that the triggerer waits on and streams.
DAG_ID = "secret_in_job"
GROUP = "airflow-task-logs"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    stack = LocalStack(
        project_dir=PROJECT,
        workdir=tmp_path_factory.mktemp("cloudwatch"),
        scenario="gpu-shortage",
        dag_id=DAG_ID,
        dags_folder=PROJECT / "tests" / "e2e" / "dags",
        extra_env={
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW_VAR_SM_PREFS_API_TOKEN": "not-a-secret-here",
            "AIRFLOW_CONN_SM_PREFS_REGISTRY": '{"conn_type": "generic", "password": "nor-here"}',
            "AIRFLOW__LOGGING__REMOTE_LOGGING": "True",
            "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER": f"cloudwatch://arn:aws:logs:us-east-1:123456789012:log-group:{GROUP}",
            "AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID": "aws_default",
        },
    )
    with stack:
        yield stack


def _shown(stack: LocalStack, run_id: str) -> list[str]:
    """The try's log as the API server serves it to the UI: its messages, in order."""
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/train/logs/1?full_content=true"
    content = stack.get(path)["content"]
    return [str(entry.get("event", "")) for entry in content if isinstance(entry, dict)]


def _stream_messages(stack: LocalStack, stream: str) -> list[str]:
    logs = stack.aws_client("logs")
    events = logs.get_log_events(logGroupName=GROUP, logStreamName=stream, startFromHead=True)["events"]
    return [task_log_message(event["message"]) for event in events]


def test_the_jobs_lines_stay_in_the_task_log_once_each(stack):
    stack.set_capacity({"ml.p5.48xlarge": 0, "ml.p4d.24xlarge": 0})
    wait_for(lambda: stack.dag_known(DAG_ID), 120, "the DAG to be parsed")
    run_id = stack.trigger(DAG_ID)

    def deferred() -> bool:
        return {ti["task_id"]: ti["state"] for ti in stack.task_instances(DAG_ID, run_id)}.get("train") == "deferred"

    wait_for(deferred, 180, "the task to defer while its job waits for capacity")
    stack.set_capacity({"ml.p4d.24xlarge": 1})
    assert stack.wait_run_done(DAG_ID, run_id, timeout=300) == "success"

    (job,) = [j for j in stack.jobs() if j["tags"].get("airflow:dag_id") == DAG_ID]
    written = stack.job_log_lines(job["name"])
    assert written, "the job wrote lines"
    # The run is success as soon as the task ends; the worker ships its last lines to CloudWatch just after,
    # so the log is read once its final line, the worker's own, is there (the run state says nothing of it).
    shown: list[str] = []

    def worker_lines_shipped() -> bool:
        shown[:] = _shown(stack, run_id)
        return any(f"job {job['name']} ended Completed" in message for message in shown)

    wait_for(worker_lines_shipped, 120, "the worker's own lines to reach the task log in CloudWatch")
    assert [message for message in shown if message in set(written)] == written, shown

    # In CloudWatch: the try's stream holds them; the trigger's own stream (which Airflow's reader may learn to
    # show), where the triggerer writes one (Airflow 3.3 does, 3.1 does not), does not.
    streams = [
        s["logStreamName"]
        for s in stack.aws_client("logs").describe_log_streams(logGroupName=GROUP)["logStreams"]
        if f"dag_id={DAG_ID}/" in s["logStreamName"]
    ]
    try_streams = [s for s in streams if s.endswith("attempt=1.log")]
    trigger_streams = [s for s in streams if ".trigger." in s]
    assert len(try_streams) == 1, streams
    assert [m for m in _stream_messages(stack, try_streams[0]) if m in set(written)] == written
    for stream in trigger_streams:
        held = [m for m in _stream_messages(stack, stream) if m in set(written)]
        assert held == [], f"{stream} holds the job's lines too: {held[:3]}"
