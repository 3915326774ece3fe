"""The emulator through every client users will point at it: aiobotocore, the AWS CLI, the amazon provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError

from tests.helpers import CREDENTIALS, GPU_PAIR, boto_client, training_request

pytestmark = pytest.mark.emulator


async def test_aiobotocore_creates_describes_and_stops(start_emulator):
    from aiobotocore.session import get_session

    server = start_emulator("gpu-shortage")
    async with get_session().create_client("sagemaker", endpoint_url=server.endpoint_url, **CREDENTIALS) as client:
        await client.create_training_job(**training_request("async-job", GPU_PAIR))
        description = await client.describe_training_job(TrainingJobName="async-job")
        assert description["ResourceConfig"]["SelectedInstanceType"] == "ml.p4d.24xlarge"
        await client.stop_training_job(TrainingJobName="async-job")
        listed = await client.list_training_jobs(StatusEquals="Stopping")
        assert [s["TrainingJobName"] for s in listed["TrainingJobSummaries"]] == ["async-job"]


def _cli_env() -> dict[str, str]:
    import botocore

    # awscli 1.x vendors an older botocore whose SageMaker model predates InstancePreferences; botocore's
    # AWS_DATA_PATH makes the unmodified CLI load the newer model installed beside it.
    models = os.path.join(os.path.dirname(botocore.__file__), "data")
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_DATA_PATH": models,
    }


def _aws(server, *args: str) -> dict:
    env = _cli_env()
    command = [
        sys.executable,
        "-m",
        "awscli",
        "sagemaker",
        *args,
        "--endpoint-url",
        server.endpoint_url,
        "--output",
        "json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else {}


def test_aws_cli_creates_and_describes(start_emulator, tmp_path):
    server = start_emulator("gpu-shortage")
    request = tmp_path / "job.json"
    request.write_text(json.dumps(training_request("cli-job", GPU_PAIR)))
    created = _aws(server, "create-training-job", "--cli-input-json", f"file://{request}")
    assert created["TrainingJobArn"].endswith("training-job/cli-job")
    described = _aws(server, "describe-training-job", "--training-job-name", "cli-job")
    assert described["ResourceConfig"]["SelectedInstanceType"] == "ml.p4d.24xlarge"


def test_aws_cli_shows_service_errors(start_emulator):
    server = start_emulator()
    env = _cli_env()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "awscli",
            "sagemaker",
            "describe-training-job",
            "--training-job-name",
            "missing",
            "--endpoint-url",
            server.endpoint_url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "ValidationException" in result.stderr


def test_amazon_provider_hook_creates_and_describes(start_emulator, aws_connection):
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    server = start_emulator("gpu-shortage")
    hook = SageMakerHook(aws_conn_id=aws_connection(server))
    hook.create_training_job(training_request("hook-job", GPU_PAIR), wait_for_completion=False, print_log=False)
    description = hook.describe_training_job("hook-job")
    assert description["ResourceConfig"]["SelectedInstanceType"] == "ml.p4d.24xlarge"


def test_amazon_provider_hook_follows_logs_of_a_job_that_has_none_yet(start_emulator, aws_connection):
    """`print_log=True` asks CloudWatch Logs for the job's streams; the emulator answers like AWS for a log
    group that does not exist (it answered UnknownOperationException, which crashed the provider)."""
    from airflow.providers.amazon.aws.hooks.sagemaker import LogState, SageMakerHook

    server = start_emulator("gpu-shortage")
    hook = SageMakerHook(aws_conn_id=aws_connection(server))
    hook.create_training_job(training_request("logged-job", GPU_PAIR), wait_for_completion=False, print_log=False)
    state, _, _ = hook.describe_training_job_with_log("logged-job", {}, [], 1, LogState.TAILING, {}, 0.0)
    assert state == LogState.TAILING
    logs = boto_client(server.endpoint_url, service="logs")
    assert logs.describe_log_groups()["logGroups"] == []
    with pytest.raises(ClientError) as error:
        logs.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName="logged-job/algo-1")
    assert error.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert server.engine.calls["Logs_20140328.DescribeLogStreams"] == 1


def test_the_aws_wrapper_needs_no_data_path_from_the_user(start_emulator, tmp_path):
    """`airflow-sm-prefs aws ...` is the unmodified AWS CLI, told where this environment's newer model is."""
    server = start_emulator("gpu-shortage")
    request = tmp_path / "job.json"
    request.write_text(json.dumps(training_request("wrapped-job", GPU_PAIR)))
    env = {k: v for k, v in _cli_env().items() if k != "AWS_DATA_PATH"}
    command = [sys.executable, "-m", "airflow_sm_prefs.cli", "aws", "sagemaker"]
    endpoint = ["--endpoint-url", server.endpoint_url, "--output", "json"]
    created = subprocess.run(
        [*command, "create-training-job", "--cli-input-json", f"file://{request}", *endpoint],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["TrainingJobArn"].endswith("training-job/wrapped-job")
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "awscli",
            "sagemaker",
            "create-training-job",
            "--cli-input-json",
            f"file://{request}",
            *endpoint,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert plain.returncode != 0 and "InstancePreferences" in plain.stderr, "the vendored model lacks the field"


@pytest.mark.parametrize("reported", ["absent", "selected"])
def test_what_the_amazon_provider_meets_with_per_entry_counts(start_emulator, aws_connection, tmp_path, reported):
    """An open question made visible: with per-entry counts, whether Describe reports
    ResourceConfig.InstanceCount decides whether the provider's log-following wait works at all."""
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    scenario = tmp_path / "counts.yaml"
    scenario.write_text(f"default_capacity: 8\nbehaviour: {{instance_count_with_per_entry_counts: {reported}}}\n")
    server = start_emulator(str(scenario))
    hook = SageMakerHook(aws_conn_id=aws_connection(server))
    hook.create_training_job(training_request("counted", GPU_PAIR), wait_for_completion=False, print_log=False)

    def follow() -> None:
        hook.check_training_status_with_log("counted", {"InProgress"}, {"Failed"}, False, 0)

    if reported == "absent":
        with pytest.raises(KeyError, match="InstanceCount"):
            follow()
    else:
        follow()
        assert hook.describe_training_job("counted")["ResourceConfig"]["InstanceCount"] == 1


@pytest.mark.parametrize("ends", ["Stopped", "Failed"])
def test_what_the_amazon_provider_meets_when_the_pending_limit_expires(start_emulator, aws_connection, tmp_path, ends):
    """The other open question made visible: a job whose pending limit expired never started. Ended
    `Stopped` (the emulator's default), the provider's wait reads its start time and raises KeyError;
    ended `Failed`, the provider reports the capacity error."""
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook
    from airflow.sdk.exceptions import AirflowException

    from airflow_sm_prefs.local_stack import control

    scenario = tmp_path / "busy.yaml"
    scenario.write_text(f"default_capacity: 0\nbehaviour: {{pending_timeout_status: {ends}}}\n")
    server = start_emulator(str(scenario))
    hook = SageMakerHook(aws_conn_id=aws_connection(server))
    request = training_request(
        "never-started", [{"InstanceType": t["InstanceType"]} for t in GPU_PAIR], InstanceCount=1
    )
    request["StoppingCondition"]["MaxPendingTimeInSeconds"] = 1800
    hook.create_training_job(request, wait_for_completion=False, print_log=False)
    control(server.endpoint_url, "advance", {"seconds": 1801})
    assert hook.describe_training_job("never-started")["TrainingJobStatus"] == ends

    def wait() -> None:
        hook.check_training_status_with_log("never-started", {"InProgress", "Stopping"}, {"Failed"}, True, 0)

    if ends == "Stopped":
        with pytest.raises(KeyError, match="TrainingStartTime"):
            wait()
    else:
        with pytest.raises(AirflowException, match="CapacityError"):
            wait()
