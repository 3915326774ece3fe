"""The preflight registry: each check a class of its own module, listed once, handed its arguments as one value;
and a new check needs a module and a line in the registry, nothing else (counted on a copy of the package)."""

from __future__ import annotations

import ast
import dataclasses
import filecmp
import importlib
import shutil
from pathlib import Path

import pytest

from airflow_sm_prefs.preflight import registry
from airflow_sm_prefs.preflight.check import Check, EntryCheck, Listed, Run
from airflow_sm_prefs.preflight.runner import Preflight
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.request.preferences import RequestValidationError
from tests.helpers import TaskLog, in_a_fresh_interpreter, training_request

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_sm_prefs"


def _checks_defined_in(module_name: str) -> list[type[Check]]:
    module = importlib.import_module(f"airflow_sm_prefs.preflight.{module_name}")
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Check)
        and value.__module__ == module.__name__
        and not getattr(value, "__abstractmethods__", None)
    ]


def test_each_check_is_the_one_check_of_its_module_and_the_registry_lists_each_once():
    homes = {
        path.stem: found
        for path in sorted((PACKAGE / "preflight").glob("*.py"))
        if (found := _checks_defined_in(path.stem))
    }
    assert all(len(checks) == 1 for checks in homes.values()), homes
    assert set(homes) == {
        "known_types",
        "certified",
        "requirements",
        "cost_caps",
        "quotas",
        "named_plans",
        "finish_by",
        "plans_first",
    }
    assert len(set(registry.CHECKS)) == len(registry.CHECKS)
    assert set(registry.CHECKS) == {check for (check,) in homes.values()}


def test_the_guardrails_judge_before_the_adjustments_that_settle_the_list():
    kinds = ["entry" if issubclass(check, EntryCheck) else check.__name__ for check in registry.CHECKS]
    assert kinds == [
        "KnownInstanceTypes",
        "CertifiedOnly",
        "entry",
        "entry",
        "entry",
        "entry",
        "FinishesBy",
        "PlansFirst",
    ]


def test_the_arguments_are_each_checks_own_and_listed_once():
    assert registry.ARGUMENTS == (
        "on_violation",
        "workload",
        "certified",
        "certification_registry",
        "requires",
        "max_hourly_cost_usd",
        "max_cost_usd",
        "quota_preflight",
        "finish_by",
        "training_plans",
    )
    assert registry.TEMPLATED_ARGUMENTS == ("max_hourly_cost_usd", "max_cost_usd", "finish_by")


def test_the_operator_names_in_its_signature_every_argument_of_the_shipped_checks():
    """Documented and typed, with Airflow's default_args: the arguments of the checks that ship."""
    import inspect

    from airflow_sm_prefs import SageMakerPreferenceTrainingOperator

    parameters = inspect.signature(SageMakerPreferenceTrainingOperator.__init__).parameters
    assert set(registry.ARGUMENTS) <= set(parameters)
    templated = SageMakerPreferenceTrainingOperator.template_fields
    assert set(registry.TEMPLATED_ARGUMENTS) <= set(templated)


def test_the_operator_holds_every_argument_of_the_shipped_checks_as_a_declared_attribute_of_its_type():
    """Declared once (``PreflightArguments``), typed as the signature takes it: mypy and an IDE see what the
    operator holds, and a value given to the operator is the attribute its check reads."""
    import inspect

    from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
    from airflow_sm_prefs.preflight.runner import Preflight, PreflightArguments

    declared = inspect.get_annotations(PreflightArguments)
    assert set(declared) == set(registry.ARGUMENTS)
    parameters = inspect.signature(SageMakerPreferenceTrainingOperator.__init__).parameters
    for name, annotation in declared.items():
        assert parameters[name].annotation == annotation, name
    assert issubclass(SageMakerPreferenceTrainingOperator, PreflightArguments)
    task = SageMakerPreferenceTrainingOperator(
        task_id="t",
        config={},
        preferences=[("ml.g5.xlarge", 1)],
        max_cost_usd=12.5,
        workload="llm-eval",
        certified="off",
    )
    held = Preflight.arguments_of(task)
    assert (task.max_cost_usd, task.workload, held["max_cost_usd"], held["certified"]) == (
        12.5,
        "llm-eval",
        12.5,
        "off",
    )


def test_the_checks_turned_on_follow_the_arguments():
    default = Preflight.of(TRAINING, {"on_violation": "fail", "quota_preflight": True})
    assert [type(c).__name__ for c in default.checks] == [
        "KnownInstanceTypes",
        "CertifiedOnly",
        "WithinQuotas",
        "NamedPlansUsable",
    ]
    assert [type(c).__name__ for c in Preflight.of(PROCESSING, {"quota_preflight": False}).checks] == [
        "KnownInstanceTypes",
        "CertifiedOnly",
    ]
    every = Preflight.of(
        TRAINING,
        {
            "on_violation": "drop",
            "requires": {"min_gpu_memory_gib": 40},
            "max_cost_usd": 100,
            "quota_preflight": True,
            "finish_by": "2026-12-06T06:00:00+00:00",
            "training_plans": "auto",
        },
    )
    assert [type(c).__name__ for c in every.checks] == [type.__name__ for type in registry.CHECKS]
    assert every.on_violation == "drop"


def test_every_bad_argument_is_named_at_once():
    with pytest.raises(RequestValidationError) as refused:
        Preflight.of(
            PROCESSING,
            {"on_violation": "skip", "max_cost_usd": -1, "quota_preflight": "yes", "training_plans": "auto"},
        )
    assert [problem.split(" ")[0] for problem in refused.value.problems] == [
        "on_violation",
        "max_cost_usd",
        "quota_preflight",
        "training_plans='auto'",
    ]


def test_a_guardrail_listed_after_the_list_is_settled_is_refused_loudly():
    listed = Listed.of(training_request("x", [{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1}]))
    run = Run(TRAINING, {}, None, TaskLog(), "drop")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="after the list was settled"):
        listed.settle(run).objected({0: "too late"})


def test_entries_dropped_after_an_adjustment_changed_the_list_are_refused_loudly():
    entries = [{"InstanceType": type, "InstanceCount": 1} for type in ("ml.p5.48xlarge", "ml.g5.xlarge")]
    listed = Listed.of(training_request("x", entries))
    run = Run(TRAINING, {}, None, TaskLog(), "drop")  # type: ignore[arg-type]
    dropped = listed.dropping(run, {1: "too slow"})  # before any adjustment: the list as given, less rank 1
    assert [removed["rank"] for removed in dropped.dropped] == [1]
    assert dropped.request["ResourceConfig"]["InstancePreferences"] == entries[:1]
    settled = listed.settle(run)
    shortened = {**settled.request, "StoppingCondition": {"MaxRuntimeInSeconds": 60}}  # as an adjustment might
    adjusted = dataclasses.replace(settled, request=shortened)
    with pytest.raises(RuntimeError, match="after an adjustment changed the list"):
        adjusted.dropping(run, {1: "too slow"})


# -- a new check: one module, one line -----------------------------------------------------------------------

NEW_CHECK = '''"""``max_instances=``: no entry may ask for more instances than this."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_sm_prefs.preflight.check import EntryCheck
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.request.preferences import RequestValidationError


@dataclass(frozen=True)
class AtMostInstances(EntryCheck):
    arguments = ("max_instances",)
    templated = ("max_instances",)

    most: int

    @classmethod
    def from_arguments(cls, kind, given):
        value = given.get("max_instances")
        if value is None:
            return None
        if type(value) is not int or value < 1:
            raise RequestValidationError([f"max_instances must be a positive whole number, got {value!r}"])
        return cls(value)

    def at_parse(self, kind, request, on_violation):
        if on_violation == "fail" and self.violations_of(kind, request):
            raise RequestValidationError(list(self.violations_of(kind, request).values()))

    def violations(self, run, request):
        return self.violations_of(run.kind, request)

    def violations_of(self, kind, request):
        listed = entries(kind, request)
        return {e.rank: f"{e.label}: more than max_instances={self.most}" for e in listed if e.count > self.most}
'''

USE_IT = """
import json
import airflow_sm_prefs
from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
from airflow_sm_prefs.preflight.runner import Preflight
from airflow_sm_prefs.preflight.check import Account
from tests.helpers import TaskLog, in_a_fresh_interpreter, training_request

seen = {"package": airflow_sm_prefs.__file__}
config = training_request("x")
two = [("ml.p5.48xlarge", 2), ("ml.g5.xlarge", 1)]
try:
    SageMakerPreferenceTrainingOperator(task_id="strict", config=config, preferences=two, max_instances=1)
except Exception as refused:
    seen["at_parse"] = str(refused)
try:
    SageMakerPreferenceTrainingOperator(task_id="bad", config=config, preferences=two, max_instances="one")
except Exception as refused:
    seen["bad_argument"] = str(refused)
task = SageMakerPreferenceTrainingOperator(
    task_id="drop", config=config, preferences=two, max_instances=1, on_violation="drop", quota_preflight=False
)
seen["templated"] = "max_instances" in task.template_fields
log = TaskLog()
account = Account("us-east-1", lambda: None, (), lambda: None)
prepared = Preflight.of(task.job_kind, Preflight.arguments_of(task)).before_create({}, task._request, account, log)
seen["kept"] = [e["InstanceType"] for e in prepared.request["ResourceConfig"]["InstancePreferences"]]
seen["dropped"] = [dict(d) for d in prepared.dropped]
print(json.dumps(seen))
"""


def test_a_new_check_is_one_module_and_one_line_in_the_registry(tmp_path):
    copy = tmp_path / "airflow_sm_prefs"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        PACKAGE.parent / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.py[co]")
    )
    (copy / "preflight" / "at_most_instances.py").write_text(NEW_CHECK)
    listing = copy / "preflight" / "registry.py"
    source = listing.read_text()
    listed = "    plans_first.PlansFirst,\n"
    assert listed in source
    source = source.replace(
        listed,
        "    __import__('airflow_sm_prefs.preflight.at_most_instances').preflight.at_most_instances.AtMostInstances,\n"
        + listed,
    )
    listing.write_text(source)
    ast.parse(source)

    changed = _differences(filecmp.dircmp(PACKAGE, copy, ignore=["__pycache__"]), Path())
    assert changed == {"preflight/at_most_instances.py", "preflight/registry.py"}

    seen = in_a_fresh_interpreter(USE_IT, tmp_path / "airflow", cwd=tmp_path, PYTHONPATH=str(tmp_path))
    assert seen["package"].startswith(str(copy))
    assert "preference #1 (2 x ml.p5.48xlarge): more than max_instances=1" in seen["at_parse"]
    assert "max_instances must be a positive whole number, got 'one'" in seen["bad_argument"]
    assert seen["templated"] is True
    assert seen["kept"] == ["ml.g5.xlarge"]
    assert seen["dropped"] == [
        {
            "rank": 0,
            "entry": {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
            "reason": "preference #1 (2 x ml.p5.48xlarge): more than max_instances=1",
        }
    ]


def _differences(compared: filecmp.dircmp[str], under: Path) -> set[str]:
    found = {str(under / name) for name in [*compared.diff_files, *compared.left_only, *compared.right_only]}
    for name, below in compared.subdirs.items():
        found |= _differences(below, under / name)
    return found
