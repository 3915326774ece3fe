"""The certification registry: round trip, updates, concurrent writers, malformed files, strict and warn."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from airflow_sm_prefs.preflight import certification
from airflow_sm_prefs.preflight.certification import CertifiedConfiguration, RegistryError
from airflow_sm_prefs.request.preferences import RequestValidationError
from airflow_sm_prefs.surface.certification_dag import verdict
from airflow_sm_prefs.surface.operators import SageMakerPreferenceTrainingOperator
from tests.helpers import training_request


def certified(instance_type: str, count: int = 1, run_seconds: float = 1800.0, **extra) -> CertifiedConfiguration:
    return CertifiedConfiguration(
        instance_type=instance_type,
        instance_count=count,
        run_seconds=run_seconds,
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/eval@sha256:abc",
        certified_at="2026-11-30",
        certified_by="tests",
        **extra,
    )


def test_a_registry_round_trips_and_an_entry_is_updated_not_duplicated(tmp_path):
    path = tmp_path / "certified.yaml"
    throughput = certification.Throughput(1840.5, "samples/s")
    certification.record(path, "eval", [certified("ml.p5.48xlarge", throughput=throughput, image_digest="sha256:abc")])
    certification.record(path, "eval", [certified("ml.p4d.24xlarge", 2)])
    certification.record(path, "eval", [certified("ml.p5.48xlarge", run_seconds=1700.0)])
    certification.record(path, "other", [certified("ml.g5.48xlarge")])
    registry = certification.read(path)
    assert [(c.instance_type, c.instance_count, c.run_seconds) for c in registry["eval"]] == [
        ("ml.p4d.24xlarge", 2, 1800.0),
        ("ml.p5.48xlarge", 1, 1700.0),
    ]
    assert set(registry) == {"eval", "other"}
    assert certification.read(tmp_path / "none-yet.yaml") == {}


def _write_many(path: str, writer: int) -> None:
    for number in range(15):
        certification.record(path, f"w{writer}", [certified(f"ml.m5.{number}xlarge")])


def test_two_writers_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "certified.yaml")
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write_many, args=(path, writer)) for writer in range(2)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
        assert process.exitcode == 0
    registry = certification.read(path)
    assert {name: len(entries) for name, entries in registry.items()} == {"w0": 15, "w1": 15}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "format: 1\nworkloads:\n  eval:\n    - instance_type: ml.p5.48xlarge\n      instance_count: two\n",
            "line 5: workloads.eval[0].instance_count: of the wrong type (str)",
        ),
        (
            "format: 1\nworkloads:\n  eval:\n    - instance_type: ml.p5.48xlarge\n      instance_count: 1\n",
            "line 4: workloads.eval[0].run_seconds: missing",
        ),
        (
            "format: 1\nworkloads:\n  eval:\n    - {instance_type: ml.p5.48xlarge, instance_count: 1, run_seconds: 9,"
            " image_uri: i, certified_at: d, certified_by: b, colour: red}\n",
            "workloads.eval[0].colour: unknown field",
        ),
        ("format: 1\nworkloads:\n  eval: [\n", "line 4: not valid YAML"),
        ("format: 2\n", "line 1: format: expected a mapping with format: 1"),
        ("format: 1\nworkloads:\n  eval: ml.p5.48xlarge\n", "line 3: workloads.eval: expected a list"),
        *(
            (
                "format: 1\nworkloads:\n  eval:\n    - {instance_type: " + instance_type + ", instance_count: 1, "
                "run_seconds: 9, image_uri: i, certified_at: d, certified_by: b" + throughput + "}\n",
                named,
            )
            for instance_type, throughput, named in (
                ("'ml.<b>p5</b>.48xlarge'", "", "workloads.eval[0].instance_type: an instance type such as"),
                ("ml.p5", "", "workloads.eval[0].instance_type: an instance type such as"),
                ("p5.48xlarge", "", "workloads.eval[0].instance_type: an instance type such as"),
                ("ml.p5.48xlarge", ", throughput: {value: .nan, unit: s/s}", "throughput: needs a positive, finite"),
                ("ml.p5.48xlarge", ", throughput: {value: .inf, unit: s/s}", "throughput: needs a positive, finite"),
                ("ml.p5.48xlarge", ", throughput: {value: -3, unit: s/s}", "throughput: needs a positive, finite"),
            )
        ),
    ],
)
def test_a_malformed_registry_names_the_file_the_line_and_the_field(tmp_path, text, named):
    path = tmp_path / "certified.yaml"
    path.write_text(text)
    with pytest.raises(RegistryError) as refused:
        certification.read(path)
    assert str(refused.value).startswith(str(path)) and named in str(refused.value)


def _strict(registry: Path, preferences, certified_mode: str = "strict"):
    return SageMakerPreferenceTrainingOperator(
        task_id="t",
        config=training_request("x", None),
        preferences=preferences,
        workload="eval",
        certified=certified_mode,
        certification_registry=str(registry),
    )


def test_strict_refuses_a_static_list_naming_an_uncertified_configuration_at_parse_time(tmp_path):
    registry = tmp_path / "certified.yaml"
    certification.record(registry, "eval", [certified("ml.p5.48xlarge")])
    _strict(registry, [("ml.p5.48xlarge", 1)])
    with pytest.raises(RequestValidationError) as refused:
        _strict(registry, [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1)])
    assert "preference #2 (1 x ml.g5.48xlarge): not certified for workload 'eval'" in str(refused.value)
    assert "certified: 1 x ml.p5.48xlarge" in str(refused.value)
    _strict(registry, [("ml.g5.48xlarge", 1)], "warn")  # warn decides at run time, and only warns


def test_a_malformed_registry_is_a_dag_import_error(tmp_path):
    registry = tmp_path / "certified.yaml"
    registry.write_text("format: 1\nworkloads:\n  eval:\n    - instance_type: 5\n")
    with pytest.raises(RequestValidationError, match=r"certified\.yaml, line 4: workloads\.eval\[0\]"):
        _strict(registry, [("ml.p5.48xlarge", 1)])


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"certified": "strict"}, "certified='strict' needs workload="),
        ({"workload": "eval", "certified": "always"}, "certified must be 'strict', 'warn' or 'off'"),
        ({"workload": ""}, "workload must be a workload name"),
    ],
)
def test_bad_certification_arguments_fail_at_parse_time(arguments, named):
    with pytest.raises(RequestValidationError, match=named):
        SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("x", None), preferences=["ml.p5.48xlarge"], **arguments
        )


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"workload": ""}, "workload must name the registry's workload (text), got ''"),
        ({"workload": "   "}, "workload must name the registry's workload (text), got '   '"),
        ({"workload": None}, "workload must name the registry's workload (text), got None"),
        ({"workload": 7}, "workload must name the registry's workload (text), got 7"),
        (
            {"candidates": [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1), ("ml.p5.48xlarge", 1)]},
            "1 x ml.p5.48xlarge is a candidate twice",
        ),
    ],
)
def test_a_certification_dag_that_could_not_record_is_refused_before_any_benchmark_runs(arguments, named):
    """Before, an empty workload ran (and paid for) every candidate, then the record refused it; two equal
    candidates were Airflow's DuplicateTaskIdFound."""
    from airflow_sm_prefs.surface.certification_dag import certification_dag

    given = {"workload": "eval", "candidates": [("ml.p5.48xlarge", 1)], **arguments}
    with pytest.raises(RequestValidationError) as refused:
        certification_dag("certify_eval", config=training_request("x", None), **given)
    assert named in str(refused.value)


def test_the_registry_reader_takes_no_workload_name_the_operators_refuse(tmp_path):
    path = tmp_path / "certified.yaml"
    path.write_text("format: 1\nworkloads:\n  '   ':\n    - " + _ENTRY + "\n")
    with pytest.raises(RegistryError, match="a workload name must be text, got '   '"):
        certification.read(path)


_ENTRY = (
    "{instance_type: ml.p5.48xlarge, instance_count: 1, run_seconds: 9, image_uri: i, certified_at: d, certified_by: b}"
)


def test_a_candidate_passes_when_it_completed_and_the_check_accepts_it():
    done = {"status": "Completed", "run_seconds": 300.0, "selected_instance_type": "ml.p5.48xlarge"}
    assert verdict(done, None)["passed"]
    assert verdict(done, lambda record: record["run_seconds"] < 60 or "too slow")["reason"] == "too slow"
    assert not verdict(done, lambda record: 1 / 0)["passed"]
    throughput = {"passed": True, "throughput": {"value": 10.0, "unit": "samples/s"}}
    assert verdict(done, lambda record: throughput)["throughput"] == {"value": 10.0, "unit": "samples/s"}
    failed = {"status": "Failed", "selected_instance_type": "ml.g5.48xlarge", "failure_reason": "AlgorithmError: x"}
    assert verdict(failed, None)["reason"] == "the job ended Failed after starting: AlgorithmError: x"
    starved = {"status": "Stopped", "selected_instance_type": None, "failure_reason": "CapacityError: none"}
    assert verdict(starved, None)["reason"].startswith("no capacity")
    assert not verdict(None, None)["passed"]


def test_a_candidate_whose_request_failed_is_not_certified_and_not_blamed():
    """A missing bucket says nothing of the configuration: the reason says to fix the request and run again."""
    reason = "ClientError: Artifact upload failed: the bucket 'certs' does not exist"
    failed = {
        "status": "Failed",
        "selected_instance_type": "ml.p4d.24xlarge",
        "failure_reason": reason,
        "failure_cause": "configuration",
    }
    judged = verdict(failed, None)
    assert not judged["passed"]
    assert judged["reason"] == (
        f"the request itself failed, which says nothing of this configuration: {reason} (fix the request and run "
        "the certification again)"
    )
