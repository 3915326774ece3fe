"""The client matrix: the emulator through clients nobody here wrote, each as a user would run it.

aiobotocore, botocore's waiters and paginators, the AWS CLI (SageMaker and S3), the amazon provider's
hooks and operators, and the SageMaker Python SDK's sagemaker-core. Where an open question about the real
service (docs/emulator.md, "Guesses") decides what a client meets, both answers are run, so the consequence shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.local_stack import control
from tests.helpers import CREDENTIALS, GPU_PAIR, boto_client, processing_request, training_request

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
    """``aws <args>`` against the emulator: the service comes first (``sagemaker ...``, ``s3 ...``)."""
    env = _cli_env()
    command = [
        sys.executable,
        "-m",
        "awscli",
        *args,
        "--endpoint-url",
        server.endpoint_url,
        "--output",
        "json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    output = result.stdout.strip()
    return json.loads(output) if output.startswith("{") else {"text": output}


def test_aws_cli_creates_and_describes(start_emulator, tmp_path):
    server = start_emulator("gpu-shortage")
    request = tmp_path / "job.json"
    request.write_text(json.dumps(training_request("cli-job", GPU_PAIR)))
    created = _aws(server, "sagemaker", "create-training-job", "--cli-input-json", f"file://{request}")
    assert created["TrainingJobArn"].endswith("training-job/cli-job")
    described = _aws(server, "sagemaker", "describe-training-job", "--training-job-name", "cli-job")
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


def test_amazon_provider_hook_follows_logs_of_a_job_that_has_none_yet(start_emulator, aws_connection, tmp_path):
    """`print_log=True` asks CloudWatch Logs for the job's streams; a queued job has none, and the emulator
    answers like AWS for a log group that does not exist (it once answered UnknownOperationException, which
    crashed the provider)."""
    from airflow.providers.amazon.aws.hooks.sagemaker import LogState, SageMakerHook

    # Sold out for good: the job is still queued however long a busy machine takes between the calls below.
    scenario = tmp_path / "sold-out.yaml"
    scenario.write_text("capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 0}\n")
    server = start_emulator(str(scenario))
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


def test_amazon_provider_print_log_wait_reads_the_jobs_streams(start_emulator, aws_connection, tmp_path):
    from airflow.providers.amazon.aws.hooks.sagemaker import SageMakerHook

    server = start_emulator(_fast_scenario(tmp_path))
    hook = SageMakerHook(aws_conn_id=aws_connection(server))
    hook.create_training_job(_uniform_training("printed"), wait_for_completion=False, print_log=False)
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    hook.check_training_status_with_log("printed", {"InProgress", "Stopping"}, {"Failed"}, True, 0)
    assert server.engine.calls["Logs_20140328.GetLogEvents"] >= 1, "the provider read the job's stream"


def test_the_aws_wrapper_needs_no_data_path_from_the_user(start_emulator, tmp_path):
    """`airflow-sm-prefs aws ...` is the unmodified AWS CLI, told where this environment's newer model is."""
    server = start_emulator("gpu-shortage")
    request = tmp_path / "job.json"
    request.write_text(json.dumps(training_request("wrapped-job", GPU_PAIR)))
    env = {k: v for k, v in _cli_env().items() if k != "AWS_DATA_PATH"}
    command = [sys.executable, "-m", "airflow_sm_prefs.surface.cli", "aws", "sagemaker"]
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
    from airflow.providers.common.compat.sdk import AirflowException

    from sm_prefs_devkit.local_stack import control

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


# -- S3 on the same endpoint: what the provider's training path and downstream tasks need ---------------------

FAST = "speed: 600\ndefault_capacity: 8\n"  # a job's whole life (about 380 virtual seconds) in under a second


def _fast_scenario(tmp_path, extra: str = "") -> str:
    scenario = tmp_path / "fast.yaml"
    scenario.write_text(FAST + extra)
    return str(scenario)


def _uniform_training(name: str, input_uri: str | None = None) -> dict:
    """Preferences without per-entry counts (InstanceCount on ResourceConfig): what the provider can follow."""
    request = training_request(name, [{"InstanceType": t["InstanceType"]} for t in GPU_PAIR], InstanceCount=1)
    if input_uri is not None:
        request["InputDataConfig"] = [
            {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_uri}}}
        ]
    return request


def test_amazon_provider_training_operator_checks_its_input_then_runs_to_the_end(
    start_emulator, aws_connection, tmp_path
):
    """The provider's operator, defaults kept (print_log=True): HeadBucket and a prefix check on the input,
    create, follow to Completed; then a plain S3Hook reads the model where Describe says it is."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator

    server = start_emulator(_fast_scenario(tmp_path), buckets={"data": ("train/part-0",)})
    conn_id = aws_connection(server)
    operator = SageMakerTrainingOperator(
        task_id="provider_training",
        config=_uniform_training("provider-op", "s3://data/train"),
        aws_conn_id=conn_id,
        check_interval=1,
    )
    result = operator.execute({})  # type: ignore[arg-type]
    training = result["Training"]
    assert training["TrainingJobStatus"] == "Completed"
    assert training["ResourceConfig"]["SelectedInstanceType"] == "ml.p5.48xlarge"
    artifact = training["ModelArtifacts"]["S3ModelArtifacts"]
    bucket, key = S3Hook.parse_s3_url(artifact)
    assert S3Hook(aws_conn_id=conn_id).check_for_key(key, bucket)
    assert server.engine.calls["s3.HEAD"] >= 1, "the provider checked the input bucket on the emulator"


def test_amazon_provider_training_operator_refuses_an_input_bucket_that_does_not_exist(
    start_emulator, aws_connection, tmp_path
):
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator
    from airflow.providers.common.compat.sdk import AirflowException

    server = start_emulator(_fast_scenario(tmp_path))
    operator = SageMakerTrainingOperator(
        task_id="provider_training",
        config=_uniform_training("provider-missing", "s3://absent-bucket/train"),
        aws_conn_id=aws_connection(server),
        check_interval=1,
    )
    with pytest.raises(AirflowException, match="absent-bucket"):
        operator.execute({})  # type: ignore[arg-type]
    assert server.engine.jobs == {}, "the provider refused before creating a job"


def test_amazon_provider_processing_operator_runs_and_its_output_can_be_read(start_emulator, aws_connection, tmp_path):
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerProcessingOperator

    server = start_emulator(_fast_scenario(tmp_path), buckets={"lake": ("raw/day/events.jsonl",)})
    conn_id = aws_connection(server)
    config = processing_request("provider-prep", [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1)
    config["ProcessingInputs"] = [
        {
            "InputName": "raw",
            "S3Input": {
                "S3Uri": "s3://lake/raw/day",
                "LocalPath": "/opt/ml/processing/raw",
                "S3DataType": "S3Prefix",
                "S3InputMode": "File",
            },
        }
    ]
    config["ProcessingOutputConfig"] = {
        "Outputs": [
            {
                "OutputName": "shards",
                "S3Output": {"S3Uri": "s3://lake/shards/day", "LocalPath": "/opt/ml/out", "S3UploadMode": "EndOfJob"},
            }
        ]
    }
    operator = SageMakerProcessingOperator(
        task_id="provider_processing", config=config, aws_conn_id=conn_id, check_interval=1
    )
    result = operator.execute({})  # type: ignore[arg-type]
    assert result["Processing"]["ProcessingJobStatus"] == "Completed"
    written = json.loads(S3Hook(aws_conn_id=conn_id).read_key("shards/day/results.json", "lake"))
    assert written["job_name"] == "provider-prep"


# -- botocore's waiters and paginators -------------------------------------------------------------------------


def test_botocore_waiters_end_on_completion_and_on_failure(start_emulator, tmp_path):
    from botocore.exceptions import WaiterError

    server = start_emulator(_fast_scenario(tmp_path))
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("waited", GPU_PAIR))
    client.create_training_job(**_uniform_training("waited-no-data", "s3://bucket/absent"))
    client.create_processing_job(
        **processing_request("waited-prep", [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1)
    )
    quick = {"Delay": 1, "MaxAttempts": 60}
    client.get_waiter("training_job_completed_or_stopped").wait(TrainingJobName="waited", WaiterConfig=quick)
    client.get_waiter("processing_job_completed_or_stopped").wait(ProcessingJobName="waited-prep", WaiterConfig=quick)
    with pytest.raises(WaiterError, match="Failed"):
        client.get_waiter("training_job_completed_or_stopped").wait(
            TrainingJobName="waited-no-data", WaiterConfig=quick
        )


@pytest.mark.parametrize("kind", ["training", "processing"])
def test_botocore_paginators_walk_every_job_once(start_emulator, kind):
    server = start_emulator("gpu-shortage")
    client = boto_client(server.endpoint_url)
    names = [f"paged-{kind}-{i}" for i in range(7)]
    for name in names:
        if kind == "training":
            client.create_training_job(**training_request(name, GPU_PAIR))
        else:
            client.create_processing_job(
                **processing_request(name, [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1)
            )
    noun = kind.capitalize()
    pages = client.get_paginator(f"list_{kind}_jobs").paginate(PaginationConfig={"PageSize": 3})
    seen = [summary[f"{noun}JobName"] for page in pages for summary in page[f"{noun}JobSummaries"]]
    assert sorted(seen) == sorted(names) and len(seen) == len(names)


# -- the AWS CLI, S3 and waits ---------------------------------------------------------------------------------


def test_aws_cli_copies_to_and_lists_s3_and_waits_for_a_job(start_emulator, tmp_path):
    server = start_emulator(_fast_scenario(tmp_path))
    data = tmp_path / "events.jsonl"
    data.write_text('{"x": 1}\n')
    _aws(server, "s3", "cp", str(data), "s3://bucket/raw/events.jsonl")
    listed = _aws(server, "s3", "ls", "s3://bucket/raw/")
    assert "events.jsonl" in listed["text"]
    request = tmp_path / "job.json"
    request.write_text(json.dumps(_uniform_training("cli-waited", "s3://bucket/raw")))
    _aws(server, "sagemaker", "create-training-job", "--cli-input-json", f"file://{request}")
    # The CLI's waiter sleeps a minute between polls; the job is over before it first looks.
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    _aws(server, "sagemaker", "wait", "training-job-completed-or-stopped", "--training-job-name", "cli-waited")
    described = _aws(server, "sagemaker", "describe-training-job", "--training-job-name", "cli-waited")
    assert described["TrainingJobStatus"] == "Completed"


# -- the SageMaker Python SDK (sagemaker-core) ---------------------------------------------------------------

SDK_PYTHON = Path(__file__).resolve().parents[2] / ".venv-sdk" / "bin" / "python"


def _sdk(server, *flows: str) -> dict:
    if not SDK_PYTHON.exists():
        pytest.fail(f"sagemaker-core's venv is missing: run `make sdk-venv` (expected {SDK_PYTHON})")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        "AWS_ENDPOINT_URL": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
    }
    script = Path(__file__).with_name("sdk_flows.py")
    result = subprocess.run(
        [str(SDK_PYTHON), str(script), *flows], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_sagemaker_core_creates_waits_lists_and_stops(start_emulator):
    server = start_emulator("gpu-shortage")
    results = _sdk(server, "training", "processing", "stop_and_list")
    assert all(flow["ok"] for flow in results.values()), {k: v.get("trace") for k, v in results.items()}
    assert results["training"]["selected"] == ["ml.p4d.24xlarge", 2]
    assert results["training"]["model"] == "s3://bucket/output/sdk-training/output/model.tar.gz"
    assert (results["processing"]["status"], results["processing"]["selected"]) == ("Completed", ["ml.m5.xlarge", 1])
    assert results["stop_and_list"] == {"ok": True, "status": "Stopped", "listed": ["sdk-stopped", "sdk-training"]}


# One p5 reservable from the first hour, none on demand; 600x, so the hour to the plan's start is 6 s.
PLAN_SUPPLY = """
speed: 600
capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 4}
runtime_seconds: {default: 600}
behaviour: {training_plan_pending_seconds: 120}
plan_supply:
  - {instance_type: ml.p5.48xlarge, count: 1, start: 0, end: 2592000, usd_per_instance_hour: 30}
"""


def test_sagemaker_core_buys_a_training_plan_waits_for_it_and_runs_a_job_on_it(start_emulator, tmp_path):
    scenario = tmp_path / "supply.yaml"
    scenario.write_text(PLAN_SUPPLY)
    results = _sdk(start_emulator(str(scenario)), "training_plan")
    flow = results["training_plan"]
    assert flow["ok"], flow.get("trace")
    assert (flow["listed_active"], flow["selected"], flow["job_status"]) == (
        ["sdk-plan"],
        ["ml.p5.48xlarge", 1],
        "Completed",
    )
    # The plan's one instance taken while the job ran, back once it ended.
    assert (flow["in_use_while_running"], flow["available_after"], flow["total"]) == (1, 1, 1)


@pytest.mark.parametrize("reported", ["absent", "selected"])
def test_what_sagemaker_core_meets_following_logs_with_per_entry_counts(start_emulator, tmp_path, reported):
    """The per-entry-count question again, for the SDK: `wait(logs=True)` sizes its log reader by
    ResourceConfig.InstanceCount; absent, the SDK compares an int with its Unassigned marker and fails."""
    server = start_emulator(
        _fast_scenario(tmp_path, f"behaviour: {{instance_count_with_per_entry_counts: {reported}}}\n")
    )
    (flow,) = _sdk(server, "wait_with_logs").values()
    if reported == "absent":
        assert not flow["ok"] and "Unassigned" in flow["error"]
    else:
        assert flow == {"ok": True, "status": "Completed"}


# -- a job that does not exist -------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["ValidationException", "ResourceNotFound"])
def test_what_clients_meet_describing_a_job_that_does_not_exist(start_emulator, aws_connection, tmp_path, answer):
    """The third open question: Describe of an unknown job is observed to answer ValidationException, while
    the API reference lists ResourceNotFound. Our hook reads both as "no such job". The amazon provider's
    operator checks that its job name is free (check_if_job_exists, on by default) and knows only
    ValidationException: under the documented answer it cannot create any job."""
    from airflow.providers.amazon.aws.operators.sagemaker import SageMakerTrainingOperator

    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    server = start_emulator(_fast_scenario(tmp_path, f"behaviour: {{describe_unknown_job: {answer}}}\n"))
    conn_id = aws_connection(server)
    assert SageMakerPreferenceHook(aws_conn_id=conn_id).describe_job_or_none(TRAINING, "nobody") is None
    operator = SageMakerTrainingOperator(
        task_id="provider_training",
        config=_uniform_training("fresh-name"),
        aws_conn_id=conn_id,
        wait_for_completion=False,
    )
    if answer == "ValidationException":
        operator.execute({})  # type: ignore[arg-type]
        assert [job["name"] for job in server.engine.snapshot()] == ["fresh-name"]
    else:
        with pytest.raises(ClientError, match="ResourceNotFound"):
            operator.execute({})  # type: ignore[arg-type]
        assert server.engine.jobs == {}


@pytest.mark.parametrize("answer", ["ResourceNotFound", "ValidationException"])
def test_stopping_a_job_that_does_not_exist_is_logged_never_raised(
    start_emulator, aws_connection, tmp_path, caplog, answer
):
    import logging

    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    server = start_emulator(_fast_scenario(tmp_path, f"behaviour: {{stop_unknown_job: {answer}}}\n"))
    with pytest.raises(ClientError) as raw:
        boto_client(server.endpoint_url).stop_training_job(TrainingJobName="nobody")
    assert raw.value.response["Error"]["Code"] == answer
    log = logging.getLogger("test.stop")
    with caplog.at_level(logging.INFO, logger="test.stop"):
        SageMakerPreferenceHook(aws_conn_id=aws_connection(server)).stop_job(TRAINING, "nobody", log)
    assert "nobody" in caplog.text
