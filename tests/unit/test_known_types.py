"""A typo in an instance type fails the DAG import with the type meant; a type newer than the catalogue does not."""

from __future__ import annotations

import json

import pytest

from airflow_sm_prefs import InstancePreference, SageMakerPreferenceTrainingOperator
from airflow_sm_prefs.preflight import known_types
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.request.preferences import RequestValidationError
from tests.helpers import training_request


def _operator(*preferences: InstancePreference) -> SageMakerPreferenceTrainingOperator:
    return SageMakerPreferenceTrainingOperator(
        task_id="t", config=training_request("x", None), preferences=list(preferences)
    )


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("ml.p4d.24xlage", "ml.p4d.24xlarge"), ("ml.g5.48xlarg", "ml.g5.48xlarge"), ("ml.m5.xlarg", "ml.m5.xlarge")],
)
def test_a_misspelt_type_fails_at_parse_with_the_type_meant(typed, meant):
    with pytest.raises(RequestValidationError) as refused:
        _operator(InstancePreference("ml.p5.48xlarge", 1), InstancePreference(typed, 2))
    assert f"preference #2 ({typed}): not an instance type" in str(refused.value)
    assert f"did you mean {meant}? [R19]" in str(refused.value)


def test_a_type_newer_than_the_catalogue_passes_for_sagemaker_to_judge():
    _operator(InstancePreference("ml.p7.48xlarge", 1), InstancePreference("ml.p4d.24xlarge", 2))


@pytest.mark.parametrize("size", ["36xlarge", "metal-48xl", "medium", "xlarge"])
def test_a_size_of_the_form_sagemaker_sizes_take_passes_even_if_uncatalogued(size):
    assert (
        known_types.misspelt(TRAINING, training_request("x", [{"InstanceType": f"ml.z9.{size}", "InstanceCount": 1}]))
        == []
    )


def test_a_type_the_team_catalogued_passes_whatever_its_size(tmp_path, monkeypatch):
    own = tmp_path / "instances.json"
    hardware = {"vcpus": 8, "memory_gib": 32, "accelerator": None, "accelerators": 0, "efa_interfaces": 0}
    own.write_text(json.dumps({"format": 1, "instances": {"ml.x9.huge": hardware}}))
    with pytest.raises(RequestValidationError, match="'huge' is not a size SageMaker sells"):
        _operator(InstancePreference("ml.x9.huge", 1))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__INSTANCE_CATALOGUE", str(own))
    _operator(InstancePreference("ml.x9.huge", 1))


def test_a_templated_type_is_left_to_the_run():
    request = training_request("x", [{"InstanceType": "{{ var.value.type }}", "InstanceCount": 1}])
    assert known_types.misspelt(TRAINING, request) == []
