"""The preference-list shapes for an older botocore (``airflow_sm_prefs.sagemaker.botocore_model``), proven on the wire.

The platform matrix runs this module on every supported line: with MWAA's botocore (1.41.5 to 1.43.56) the
shapes come from the package's extras; with the project's lock (1.43.90 or later) from botocore itself, and
the extras must then stay out of the way.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import pytest
from packaging.version import Version

import airflow_sm_prefs
from airflow_sm_prefs.sagemaker import botocore_model
from tests.helpers import CREDENTIALS, boto_client, processing_request, training_request

EXTRAS = botocore_model.EXTRAS_FOLDER / "sagemaker" / "2017-07-24" / "service-2.sdk-extras.json"
OLD_BOTOCORE = botocore_model.model_needs_extras(botocore_model.installed_botocore())
PLAN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/team-p5-reservation"
TRAINING_LIST = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "TrainingPlanArns": [PLAN]},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]
PROCESSING_LIST = [
    {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.m5.4xlarge", "InstanceCount": 2},
]


@pytest.mark.parametrize(
    ("version", "needs"),
    [("1.41.5", True), ("1.42.84", True), ("1.43.56", True), ("1.43.89", True), ("1.43.90", False), ("1.44.0", False)],
)
def test_the_extras_are_for_botocore_before_1_43_90_only(version, needs):
    assert botocore_model.model_needs_extras(Version(version)) is needs
    assert botocore_model.model_needs_extras(None) is False


def test_the_folder_goes_first_once_and_keeps_the_users_paths(monkeypatch):
    monkeypatch.setattr(botocore_model, "installed_botocore", lambda: Version("1.41.5"))
    environ = {"AWS_DATA_PATH": "/opt/models"}
    assert botocore_model.supply_missing_shapes(environ) and botocore_model.supply_missing_shapes(environ)
    assert environ["AWS_DATA_PATH"].split(":") == [str(botocore_model.EXTRAS_FOLDER), "/opt/models"]
    monkeypatch.setattr(botocore_model, "installed_botocore", lambda: Version("1.43.117"))
    untouched: dict[str, str] = {}
    assert not botocore_model.supply_missing_shapes(untouched) and untouched == {}
    loader_paths = ["/builtin"]
    assert not botocore_model.extend_loader(type("Loader", (), {"search_paths": loader_paths})())
    assert loader_paths == ["/builtin"], "a newer model is never patched"


def test_a_newer_model_says_what_the_extras_say():
    """Where botocore has the shapes (the project's lock), ours must agree with AWS's own model: the same
    members pointing at the same shapes, the same types, bounds and required members."""
    if OLD_BOTOCORE:
        pytest.skip("this botocore predates the shapes; the wire tests below cover it")
    import botocore.session

    loader = botocore.session.Session().get_component("data_loader")
    assert str(botocore_model.EXTRAS_FOLDER) not in loader.search_paths
    shapes = loader.load_service_model("sagemaker", "service-2")["shapes"]
    for name, ours in json.loads(EXTRAS.read_text())["merge"]["shapes"].items():
        theirs = shapes[name]
        for key, value in ours.items():
            if key == "members":
                for member, target in value.items():
                    assert {k: v for k, v in theirs["members"][member].items() if k != "documentation"} == target
            elif key == "member":
                assert theirs["member"]["shape"] == value["shape"], name
            else:
                assert theirs.get(key, []) == value, f"{name}.{key}"


def _raw_call(endpoint_url: str, operation: str, body: dict) -> dict:
    """A SageMaker call with no botocore in between: what the service holds, not what a parser kept."""
    request = urllib.request.Request(
        endpoint_url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": f"SageMaker.{operation}",
            "Authorization": f"AWS4-HMAC-SHA256 Credential={CREDENTIALS['aws_access_key_id']}/20261202/us-east-1/"
            "sagemaker/aws4_request",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.emulator
def test_a_training_list_arrives_whole_and_the_selection_is_parsed_sync_and_async(start_emulator, aws_connection):
    server = start_emulator("reserved-first")
    client = boto_client(server.endpoint_url)  # validation on: botocore checks the list against its model
    client.create_training_job(**training_request("wire", TRAINING_LIST))
    held = _raw_call(server.endpoint_url, "DescribeTrainingJob", {"TrainingJobName": "wire"})
    assert held["ResourceConfig"]["InstancePreferences"] == TRAINING_LIST
    parsed = client.describe_training_job(TrainingJobName="wire")["ResourceConfig"]
    assert parsed["InstancePreferences"] == TRAINING_LIST
    assert (parsed["SelectedInstanceType"], parsed["SelectedInstanceCount"]) == ("ml.p4d.24xlarge", 2)

    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    hook = SageMakerPreferenceHook(aws_conn_id=aws_connection(server), region_name="us-east-1")
    assert hook.describe_job(TRAINING, "wire")["ResourceConfig"]["SelectedInstanceType"] == "ml.p4d.24xlarge"

    async def described_by_the_triggers_client() -> dict:
        async with await hook.get_async_conn() as async_client:
            return await SageMakerPreferenceHook.describe_job_async(async_client, TRAINING, "wire")

    resources = asyncio.run(described_by_the_triggers_client())["ResourceConfig"]
    assert (resources["SelectedInstanceType"], resources["InstancePreferences"]) == ("ml.p4d.24xlarge", TRAINING_LIST)


@pytest.mark.emulator
def test_a_processing_list_without_a_type_of_its_own_arrives_whole_and_is_parsed(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    request = processing_request("wire-prep", PROCESSING_LIST)
    assert "InstanceType" not in request["ProcessingResources"]["ClusterConfig"]
    client.create_processing_job(**request)
    held = _raw_call(server.endpoint_url, "DescribeProcessingJob", {"ProcessingJobName": "wire-prep"})
    assert held["ProcessingResources"]["ClusterConfig"]["InstancePreferences"] == PROCESSING_LIST
    cluster = client.describe_processing_job(ProcessingJobName="wire-prep")["ProcessingResources"]["ClusterConfig"]
    assert (cluster["SelectedInstanceType"], cluster["SelectedInstanceCount"]) == ("ml.g5.12xlarge", 1)


def test_without_the_extras_this_botocore_refuses_the_list():
    """The control: the extras, not luck, make the tests above pass on an older botocore."""
    if not OLD_BOTOCORE:
        pytest.skip("this botocore has the shapes itself")
    import boto3
    import botocore.session
    from botocore.exceptions import ParamValidationError

    bare = botocore.session.Session()
    bare.set_config_variable("data_path", "")
    client = boto3.session.Session(botocore_session=bare).client(
        "sagemaker", endpoint_url="http://127.0.0.1:9", **CREDENTIALS
    )
    with pytest.raises(ParamValidationError, match="InstancePreferences"):
        client.create_training_job(**training_request("bare", TRAINING_LIST))


def test_the_extras_ship_in_the_package():
    assert EXTRAS.is_file() and EXTRAS.is_relative_to(Path(airflow_sm_prefs.__file__).parent)
