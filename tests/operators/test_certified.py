"""certified= at run time, against the emulator: warn records, strict refuses, the record compares the run
with its benchmark."""

from __future__ import annotations

import json

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_sm_prefs.preflight import certification
from tests.helpers import FakeTI
from tests.operators.test_operator import _creates, context, training_operator
from tests.unit.test_certification import certified

pytestmark = pytest.mark.emulator


@pytest.fixture
def registry(tmp_path):
    path = tmp_path / "certified.yaml"
    certification.record(path, "eval", [certified("ml.p5.48xlarge", run_seconds=200.0)])
    return str(path)


def test_warn_records_the_uncertified_entries_and_the_run_against_its_benchmark(
    start_emulator, aws_connection, registry
):
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server), workload="eval", certification_registry=registry, deferrable=False
    )
    ti = FakeTI()
    result = operator.execute(context(ti))
    assert result["uncertified_preferences"] == [
        f"preference #2 (2 x ml.p4d.24xlarge): not certified for workload 'eval' in {registry} "
        "(certified: 1 x ml.p5.48xlarge)"
    ]
    assert (result["selected_instance_type"], result["certified_run_seconds"]) == ("ml.p5.48xlarge", 200.0)
    assert result["run_time_vs_certified"] == round(result["run_seconds"] / 200.0, 3)


def test_strict_refuses_a_rendered_list_before_any_create(start_emulator, aws_connection, registry):
    server = start_emulator("ample")
    operator = training_operator(
        aws_connection(server),
        preferences="{{ params.prefs }}",
        workload="eval",
        certified="strict",
        certification_registry=registry,
    )
    operator.preferences = json.dumps(  # as rendered
        [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}, {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1}]
    )
    with pytest.raises(AirflowFailException, match=r"preference #2 \(1 x ml\.g5\.48xlarge\): not certified"):
        operator.execute(context())
    assert _creates(server) == 0
