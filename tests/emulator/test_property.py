"""Property: on everything botocore itself can check, botocore and the emulator never disagree.

Requests vary only along dimensions botocore validates client-side (required members, types, minimums);
everything else is kept valid, so "botocore accepts" must mean "the emulator accepts" and vice versa.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sm_prefs_devkit.emulator import EmulatorServer, load, service_model
from tests.helpers import boto_client, processing_request, training_request

pytestmark = pytest.mark.emulator

TRAINING_TYPES = ["ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge", "ml.g6.48xlarge"]
PROCESSING_TYPES = ["ml.m5.xlarge", "ml.c5.xlarge", "ml.g5.12xlarge", "ml.g6.12xlarge"]
_names = itertools.count()


@st.composite
def preference_lists(draw: Any, types: list[str], counts: list[int], allow_plans: bool) -> list[dict[str, Any]]:
    chosen = draw(st.lists(st.sampled_from(types), min_size=0, max_size=3, unique=True))
    entries = []
    for instance_type in chosen:
        entry: dict[str, Any] = {"InstanceCount": draw(st.sampled_from(counts))}
        if draw(st.booleans()) or not draw(st.booleans()):  # mostly present, sometimes missing (required)
            entry["InstanceType"] = instance_type
        if allow_plans:
            plan = draw(st.sampled_from([None, [], ["arn:short"]]))
            if plan is not None:
                entry["TrainingPlanArns"] = plan
        entries.append(entry)
    return entries


@st.composite
def training_requests(draw: Any) -> dict[str, Any]:
    request = training_request(f"prop-t-{next(_names)}", draw(preference_lists(TRAINING_TYPES, [-1, 1, 2], True)))
    request["ResourceConfig"]["VolumeSizeInGB"] = draw(st.sampled_from([-1, 10, 500]))
    pending = draw(st.sampled_from([None, 1799, 1800, 3600, "3600"]))
    if pending is not None:
        request["StoppingCondition"]["MaxPendingTimeInSeconds"] = pending
    return request


@st.composite
def processing_requests(draw: Any) -> dict[str, Any]:
    request = processing_request(f"prop-p-{next(_names)}", draw(preference_lists(PROCESSING_TYPES, [0, 1, 2], False)))
    if draw(st.booleans()):
        request["ProcessingResources"]["ClusterConfig"].pop("VolumeSizeInGB")
    if draw(st.booleans()):
        request["StoppingCondition"] = {}
    return request


def _botocore_accepts(operation: str, request: dict[str, Any]) -> bool:
    shape = service_model.operation(operation).input_shape
    return not ParamValidator().validate(request, shape).has_errors()


def ample_server_jobs_named(client: Any, request: dict[str, Any]) -> bool:
    name = request.get("TrainingJobName") or request.get("ProcessingJobName")
    method = "list_training_jobs" if "TrainingJobName" in request else "list_processing_jobs"
    summaries = next(v for k, v in getattr(client, method)(NameContains=name).items() if k.endswith("Summaries"))
    return any(s.get("TrainingJobName", s.get("ProcessingJobName")) == name for s in summaries)


def _emulator_accepts(client: Any, method: str, request: dict[str, Any]) -> bool:
    try:
        getattr(client, method)(**request)
    except ClientError as error:
        # A value of the wrong JSON type is the protocol's SerializationException, a broken constraint the
        # service's ValidationException: both are a refusal, nothing else is.
        assert error.response["Error"]["Code"] in ("ValidationException", "SerializationException"), error.response
        assert not ample_server_jobs_named(client, request)
        return False
    return True


@pytest.fixture(scope="module")
def ample_server():
    with EmulatorServer(load("ample")) as server:
        yield server


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=training_requests())
def test_training_requests_agree(ample_server, request):
    client = boto_client(ample_server.endpoint_url, validate=False)
    assert _emulator_accepts(client, "create_training_job", request) == _botocore_accepts("CreateTrainingJob", request)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=processing_requests())
def test_processing_requests_agree(ample_server, request):
    client = boto_client(ample_server.endpoint_url, validate=False)
    assert _emulator_accepts(client, "create_processing_job", request) == _botocore_accepts(
        "CreateProcessingJob", request
    )
