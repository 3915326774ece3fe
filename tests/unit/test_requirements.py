"""requires=: the instance catalogue and the hardware check, at parse time and before submission."""

from __future__ import annotations

import json
from pathlib import Path

import botocore.session
import pytest

from airflow_sm_prefs import InstanceRequirements
from airflow_sm_prefs.preflight import requirements
from airflow_sm_prefs.reference import instance_catalogue
from airflow_sm_prefs.request.preferences import ACCELERATED_PREFIXES, RequestValidationError
from airflow_sm_prefs.storage.paths import SHIPPED_DATA
from airflow_sm_prefs.surface.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)
from tests.helpers import processing_request, training_request

CATALOGUE = instance_catalogue.shipped()


def _enum(kind: str) -> set[str]:
    return set(botocore.session.get_session().get_service_model("sagemaker").shape_for(kind).enum)


def test_the_catalogue_covers_every_accelerated_type_botocore_knows_but_the_ones_it_names():
    shipped = json.loads((SHIPPED_DATA / "instances.json").read_text())
    accelerated = {
        name
        for name in _enum("TrainingInstanceType") | _enum("ProcessingInstanceType")
        if name.startswith(ACCELERATED_PREFIXES)
    }
    assert accelerated - set(CATALOGUE) == set(shipped["not_found"]) == {"ml.p6e-gb200.36xlarge"}
    assert shipped["retrieved"] and len(shipped["sources"]) == 3
    assert all(CATALOGUE[name].accelerators > 0 for name in accelerated - set(shipped["not_found"]))


def test_the_catalogue_agrees_with_the_sagemaker_sdks_gpu_table():
    """sagemaker-core ships AWS's own GPU count and memory for some types; the catalogue must not contradict it."""
    tables = sorted(
        Path(".venv-sdk").glob("lib/python*/site-packages/sagemaker/core/image_uri_config/instance_gpu_info.json")
    )
    if not tables:
        pytest.skip("sagemaker-core's venv is not built here (make sdk-venv)")
    sdk = json.loads(tables[0].read_text())["us-east-1"]
    compared = 0
    for name, gpu in sdk.items():
        if name not in CATALOGUE:
            continue
        hardware = CATALOGUE[name]
        assert hardware.accelerators == gpu["Count"], name
        total = hardware.accelerators * (hardware.accelerator_memory_gib or 0) * 1024
        assert abs(total - gpu["TotalGpuMemoryInMiB"]) <= 0.1 * gpu["TotalGpuMemoryInMiB"], name
        compared += 1
    assert compared >= 20


def test_gpu_memory_refuses_g5_and_accepts_p4d():
    needs = InstanceRequirements(min_gpu_memory_gib=40)
    assert requirements.shortfalls(needs, CATALOGUE["ml.p4d.24xlarge"], 1) == []
    (problem,) = requirements.shortfalls(needs, CATALOGUE["ml.g5.48xlarge"], 1)
    assert "per accelerator, below min_gpu_memory_gib=40" in problem


def test_efa_architecture_total_gpus_and_accelerator_kind():
    assert requirements.shortfalls(InstanceRequirements(efa=True), CATALOGUE["ml.g5.xlarge"], 1) == [
        "no EFA (Elastic Fabric Adapter) support"
    ]
    assert requirements.shortfalls(InstanceRequirements(efa=True), CATALOGUE["ml.p5.48xlarge"], 1) == []
    hopper = InstanceRequirements(gpu_architectures=("hopper",))
    assert "ampere is not one of hopper" in requirements.shortfalls(hopper, CATALOGUE["ml.p4d.24xlarge"], 1)[0]
    sixteen = InstanceRequirements(min_total_gpus=16)
    assert requirements.shortfalls(sixteen, CATALOGUE["ml.p4d.24xlarge"], 2) == []
    assert "8 x 1 = 8 accelerators" in requirements.shortfalls(sixteen, CATALOGUE["ml.p4d.24xlarge"], 1)[0]
    assert requirements.shortfalls(InstanceRequirements(accelerator="trainium"), CATALOGUE["ml.trn1.32xlarge"], 1) == []
    assert (
        "has no gpu"
        in requirements.shortfalls(InstanceRequirements(accelerator="gpu"), CATALOGUE["ml.m5.xlarge"], 1)[0]
    )


def test_a_static_list_that_cannot_meet_requires_fails_at_parse_time_naming_the_entry():
    with pytest.raises(RequestValidationError) as refused:
        SageMakerPreferenceTrainingOperator(
            task_id="t",
            config=training_request("x", None),
            preferences=[("ml.p4d.24xlarge", 1), ("ml.g5.48xlarge", 1)],
            requires={"min_gpu_memory_gib": 40},
        )
    assert "preference #2 (1 x ml.g5.48xlarge)" in str(refused.value)
    assert "preference #1" not in str(refused.value)


def test_with_drop_or_a_templated_list_the_run_decides():
    from airflow_sm_prefs.preflight import entries

    dropping = SageMakerPreferenceTrainingOperator(
        task_id="t",
        config=training_request("x", None),
        preferences=[("ml.p4d.24xlarge", 1), ("ml.g5.48xlarge", 1)],
        requires=InstanceRequirements(min_gpu_memory_gib=40),
        on_violation="drop",
    )
    assert dropping._request is not None
    from airflow_sm_prefs.preflight.runner import Preflight

    preflight = Preflight.of(dropping.job_kind, Preflight.arguments_of(dropping))
    (check,) = [c for c in preflight.checks if isinstance(c, requirements.MeetsRequirements)]
    requires = check.requires
    violations = requirements.requirement_violations(dropping.job_kind, dropping._request, requires)
    assert list(violations) == [1], "the import passed, and the run will drop entry #2"
    templated = SageMakerPreferenceProcessingOperator(
        task_id="p",
        config=processing_request("x", None),
        preferences="{{ params.prefs }}",
        requires={"efa": True},
    )
    assert templated._request is not None
    assert entries.entries(templated.job_kind, templated._request) == [], "nothing to judge before rendering"


@pytest.mark.parametrize(
    ("requires", "named"),
    [
        ({"min_gpu_memory": 40}, "unknown field(s) min_gpu_memory"),
        ({"min_gpu_memory_gib": -1}, "requires.min_gpu_memory_gib must be a positive number"),
        ({"min_total_gpus": 2.5}, "requires.min_total_gpus must be a positive integer"),
        ({"gpu_architectures": []}, "requires.gpu_architectures must be a non-empty list"),
        ({"efa": "yes"}, "requires.efa must be True or False"),
        ({"accelerator": "tpu"}, "requires.accelerator must be one of"),
        (["efa"], "requires must be an InstanceRequirements or a dict"),
    ],
)
def test_bad_requirements_fail_at_parse_time(requires, named):
    with pytest.raises(RequestValidationError, match=None) as refused:
        SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("x", None), preferences=["ml.p4d.24xlarge"], requires=requires
        )
    assert named in str(refused.value)


def test_a_type_the_catalogue_lacks_is_refused_unless_the_user_adds_it(tmp_path, monkeypatch):
    preferences = [("ml.p6e-gb200.36xlarge", 1)]
    with pytest.raises(RequestValidationError, match="not in the instance catalogue"):
        SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("x", None), preferences=preferences, requires={"efa": True}
        )
    mine = tmp_path / "catalogue.json"
    entry = {
        "vcpus": 144,
        "memory_gib": 1000,
        "accelerator": "gpu",
        "accelerator_model": "gb200",
        "accelerators": 4,
        "accelerator_memory_gib": 185,
        "gpu_architecture": "blackwell",
        "efa_interfaces": 8,
        "cpu_architecture": "arm64",
        "source": "our own measurement",
    }
    mine.write_text(json.dumps({"format": 1, "instances": {"ml.p6e-gb200.36xlarge": entry}}))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__INSTANCE_CATALOGUE", str(mine))
    SageMakerPreferenceTrainingOperator(
        task_id="t", config=training_request("x", None), preferences=preferences, requires={"efa": True}
    )


def test_a_malformed_user_catalogue_names_the_file_and_the_entry(tmp_path, monkeypatch):
    mine = tmp_path / "catalogue.json"
    mine.write_text(json.dumps({"format": 1, "instances": {"ml.x": {"vcpus": "many"}}}))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__INSTANCE_CATALOGUE", str(mine))
    with pytest.raises(instance_catalogue.CatalogueError, match=r"catalogue\.json: instances\.ml\.x\.vcpus"):
        instance_catalogue.current()
    with pytest.raises(RequestValidationError, match=r"catalogue\.json: instances\.ml\.x\.vcpus") as refused:
        SageMakerPreferenceTrainingOperator(
            task_id="t",
            config=training_request("x", None),
            preferences=[("ml.p4d.24xlarge", 1)],
            requires={"efa": True},
        )
    assert len(refused.value.problems) == 1, "a task's import names the file, as one problem of its request"


def test_every_check_is_asked_and_an_entry_objected_to_twice_keeps_the_first_reason():
    from dataclasses import dataclass

    from airflow_sm_prefs.preflight.check import EntryCheck, Listed, Run
    from airflow_sm_prefs.request.jobs import TRAINING
    from tests.helpers import TaskLog

    @dataclass(frozen=True)
    class Objects(EntryCheck):
        ranks: tuple[int, ...]
        why: str

        @classmethod
        def from_arguments(cls, kind, given):
            return None

        def violations(self, run, request):
            return {rank: f"preference #{rank + 1}: {self.why}" for rank in self.ranks}

    def enforce(checks, on_violation, log):
        run = Run(TRAINING, {}, None, log, on_violation)  # type: ignore[arg-type]
        listed = Listed.of(request)
        for check in checks:
            listed = check.before_create(run, listed)
        settled = listed.settle(run)
        return settled.request, list(settled.dropped)

    request = training_request(
        "x", [{"InstanceType": t, "InstanceCount": 1} for t in ("ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.g5.48xlarge")]
    )
    log = TaskLog()
    kept, dropped = enforce([Objects((1,), "too dear"), Objects((1, 2), "short quota")], "drop", log)
    assert [entry["InstanceType"] for entry in kept["ResourceConfig"]["InstancePreferences"]] == ["ml.p5.48xlarge"]
    assert [(d["rank"], d["reason"]) for d in dropped] == [
        (1, "preference #2: too dear"),
        (2, "preference #3: short quota"),
    ]
    assert log.messages == ["Dropped preference #2: too dear", "Dropped preference #3: short quota"]
    with pytest.raises(RequestValidationError, match="too dear"):
        enforce([Objects((1,), "too dear")], "fail", log)


# -- the rule itself, field by field: each bound met exactly, each shortfall worded exactly ---------------------


def _hardware(**changes):
    from airflow_sm_prefs.reference.instance_catalogue import Hardware

    four_a10g = {
        "instance_type": "ml.test.12xlarge",
        "vcpus": 8,
        "memory_gib": 64.0,
        "cpu_architecture": "x86_64",
        "accelerator": "gpu",
        "accelerator_model": "a10g",
        "accelerators": 4,
        "accelerator_memory_gib": 24.0,
        "gpu_architecture": "ampere",
        "efa_interfaces": 0,
        "source": "a test",
    }
    return Hardware(**{**four_a10g, **changes})


@pytest.mark.parametrize(
    ("requires", "count", "changes", "missing"),
    [
        ({"min_gpu_memory_gib": 24}, 1, {}, []),
        ({"min_gpu_memory_gib": 24.5}, 1, {}, ["24 GiB per accelerator, below min_gpu_memory_gib=24.5"]),
        (
            {"min_gpu_memory_gib": 1},
            1,
            {"accelerator_memory_gib": None},
            ["unknown per accelerator, below min_gpu_memory_gib=1"],
        ),
        ({"min_total_gpus": 8}, 2, {}, []),
        ({"min_total_gpus": 8}, 1, {}, ["4 x 1 = 4 accelerators, below min_total_gpus=8"]),
        ({"min_vcpus": 8}, 1, {}, []),
        ({"min_vcpus": 9}, 3, {}, ["8 vCPUs, below min_vcpus=9"]),  # per instance: a count does not add up
        ({"min_memory_gib": 64}, 1, {}, []),
        ({"min_memory_gib": 64.5}, 1, {}, ["64 GiB of memory, below min_memory_gib=64.5"]),
        ({"cpu_architectures": ["arm64", "x86_64"]}, 1, {}, []),
        ({"cpu_architectures": ["arm64", "riscv64"]}, 1, {}, ["CPU architecture x86_64 is not one of arm64, riscv64"]),
        ({"gpu_architectures": ["ampere"]}, 1, {}, []),
        (
            {"gpu_architectures": ["hopper", "blackwell"]},
            1,
            {"gpu_architecture": None},
            ["GPU architecture none is not one of hopper, blackwell"],
        ),
        ({"efa": False}, 1, {}, []),
        ({"efa": True}, 1, {"efa_interfaces": 1}, []),
        ({"efa": True}, 1, {}, ["no EFA (Elastic Fabric Adapter) support"]),
        ({"accelerator": "gpu"}, 1, {}, []),
        ({"accelerator": "none"}, 1, {}, ["has 4 a10g accelerator(s), a CPU-only workload was asked"]),
        ({"accelerator": "none"}, 1, {"accelerator": None, "accelerators": 0}, []),
        ({"accelerator": "trainium"}, 1, {}, ["has no trainium (gpu)"]),
        ({"accelerator": "trainium"}, 1, {"accelerator": None}, ["has no trainium (no accelerator)"]),
    ],
)
def test_each_requirement_is_met_at_its_bound_and_a_shortfall_says_what_the_type_has(requires, count, changes, missing):
    judged = requirements.judged(requires)
    assert judged is not None
    assert requirements.shortfalls(judged, _hardware(**changes), count) == missing


def test_every_shortfall_of_one_type_is_named_in_the_order_requirements_are_listed():
    everything = requirements.judged(
        {
            "accelerator": "none",
            "min_gpu_memory_gib": 80,
            "gpu_architectures": ["hopper"],
            "min_total_gpus": 16,
            "efa": True,
            "min_vcpus": 96,
            "min_memory_gib": 1024,
            "cpu_architectures": ["arm64"],
        }
    )
    assert everything is not None
    assert [problem.split(" ")[-1] for problem in requirements.shortfalls(everything, _hardware(), 2)] == [
        "asked",
        "min_gpu_memory_gib=80",
        "hopper",
        "min_total_gpus=16",
        "support",
        "min_vcpus=96",
        "min_memory_gib=1024",
        "arm64",
    ]


@pytest.mark.parametrize(
    ("requires", "problems"),
    [
        ({"min_gpu_memory_gib": True}, ["requires.min_gpu_memory_gib must be a positive number of GiB, got True"]),
        ({"min_memory_gib": 0}, ["requires.min_memory_gib must be a positive number of GiB, got 0"]),
        ({"min_memory_gib": float("inf")}, ["requires.min_memory_gib must be a positive number of GiB, got inf"]),
        ({"min_memory_gib": "64"}, ["requires.min_memory_gib must be a positive number of GiB, got '64'"]),
        ({"min_vcpus": 0}, ["requires.min_vcpus must be a positive integer, got 0"]),
        ({"min_vcpus": True}, ["requires.min_vcpus must be a positive integer, got True"]),
        ({"cpu_architectures": [""]}, ["requires.cpu_architectures must be a non-empty list of names, got ('',)"]),
        (
            {"cpu_architectures": "x86_64"},
            ["requires.cpu_architectures must be a non-empty list of names, got 'x86_64'"],
        ),
        (
            {"gpu_architectures": ["hopper", 9]},
            ["requires.gpu_architectures must be a non-empty list of names, got ('hopper', 9)"],
        ),
        ({"efa": 1}, ["requires.efa must be True or False, got 1"]),
        (
            {"min_vcpus": -2, "accelerator": "tpu"},
            [
                "requires.min_vcpus must be a positive integer, got -2",
                "requires.accelerator must be one of gpu, trainium, inferentia, none; got 'tpu'",
            ],
        ),
        (
            {"min_gpus": 1, "arch": "x"},
            [
                "requires: unknown field(s) arch, min_gpus; known: accelerator, cpu_architectures, efa, "
                "gpu_architectures, min_gpu_memory_gib, min_memory_gib, min_total_gpus, min_vcpus"
            ],
        ),
        (("efa",), ["requires must be an InstanceRequirements or a dict of its fields, got tuple"]),
    ],
)
def test_each_bad_requirement_is_one_problem_worded_exactly(requires, problems):
    with pytest.raises(RequestValidationError) as refused:
        requirements.judged(requires)
    assert refused.value.problems == problems


def test_requirements_given_as_a_value_are_checked_too_and_lists_become_tuples():
    assert requirements.judged(None) is None
    one = {"min_total_gpus": 1, "min_vcpus": 1, "min_gpu_memory_gib": 0.5, "min_memory_gib": 1}
    assert requirements.judged(one) == InstanceRequirements(**one), "the smallest positive values are positive"
    with pytest.raises(RequestValidationError, match="min_total_gpus must be a positive integer, got 0"):
        requirements.judged(InstanceRequirements(min_total_gpus=0))
    given = requirements.judged({"gpu_architectures": ["hopper"], "min_memory_gib": 0.5, "accelerator": "other"})
    assert given == InstanceRequirements(gpu_architectures=("hopper",), min_memory_gib=0.5, accelerator="other")
    assert given.as_dict() == {"gpu_architectures": ["hopper"], "min_memory_gib": 0.5, "accelerator": "other"}


def test_an_entry_is_judged_by_its_own_type_and_count_and_one_the_catalogue_lacks_is_named():
    catalogue = {"ml.test.12xlarge": _hardware()}
    needs = InstanceRequirements(min_total_gpus=8)
    listed = [
        (0, "ml.unknown.xlarge", 4, "preference #1 (4 x ml.unknown.xlarge)"),
        (1, "ml.test.12xlarge", 2, "preference #2 (2 x ml.test.12xlarge)"),
        (2, "ml.test.12xlarge", 1, "preference #3 (1 x ml.test.12xlarge)"),
    ]
    assert requirements.violations(needs, listed, catalogue) == {
        0: "preference #1 (4 x ml.unknown.xlarge): ml.unknown.xlarge is not in the instance catalogue, so requires= "
        "cannot be checked; add it to your catalogue file ([sm_prefs] instance_catalogue)",
        2: "preference #3 (1 x ml.test.12xlarge): 4 x 1 = 4 accelerators, below min_total_gpus=8 "
        "(requires={'min_total_gpus': 8})",
    }
    two_short = InstanceRequirements(min_vcpus=16, efa=True)
    assert requirements.violations(two_short, listed[2:], catalogue) == {
        2: "preference #3 (1 x ml.test.12xlarge): no EFA (Elastic Fabric Adapter) support; 8 vCPUs, below "
        "min_vcpus=16 (requires={'efa': True, 'min_vcpus': 16})"
    }


def test_before_create_the_check_judges_the_rendered_list_of_the_runs_kind():
    from airflow_sm_prefs.preflight.check import Run
    from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
    from tests.helpers import TaskLog

    check = requirements.MeetsRequirements(InstanceRequirements(min_gpu_memory_gib=40))
    listed = [
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
    ]
    for kind, request in ((TRAINING, training_request("x", listed)), (PROCESSING, processing_request("x", listed))):
        run = Run(kind, {}, None, TaskLog(), "drop")  # type: ignore[arg-type]
        (reason,) = check.violations(run, request).values()
        assert list(check.violations(run, request)) == [1], kind.name
        assert reason == (
            "preference #2 (1 x ml.g5.48xlarge): 22.35 GiB per accelerator, below min_gpu_memory_gib=40 "
            "(requires={'min_gpu_memory_gib': 40})"
        )
