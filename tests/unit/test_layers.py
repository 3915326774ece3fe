"""The package's layers as a contract: ``[tool.importlinter]`` in pyproject.toml, held to the code here.

Every import counts, wherever it stands (module level, inside a function, under ``TYPE_CHECKING``): an import
hidden in a function is still a dependency, and the layers are about dependencies, not load order. No list of
exceptions: a module that needs something above it belongs elsewhere.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import in_a_fresh_interpreter

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_sm_prefs"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Layers:
    """The contract: layers top to bottom, each a tuple of sibling subpackages that import neither each other."""

    root: str
    order: tuple[tuple[str, ...], ...]

    @classmethod
    def from_pyproject(cls, pyproject: Path = ROOT / "pyproject.toml") -> Layers:
        settings = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
        (contract,) = [c for c in settings["contracts"] if c["type"] == "layers"]
        assert contract["containers"] == [settings["root_package"]]
        assert contract.get("exhaustive") is True, "every subpackage must be placed in a layer"
        order = tuple(tuple(name.strip() for name in layer.split("|")) for layer in contract["layers"])
        return cls(settings["root_package"], order)

    def level(self, subpackage: str) -> int:
        for index, siblings in enumerate(self.order):
            if subpackage in siblings:
                return index
        raise KeyError(subpackage)

    def subpackages(self) -> set[str]:
        return {name for siblings in self.order for name in siblings}

    def problem(self, importer: str, imported: str) -> str | None:
        """Why ``importer`` may not import ``imported`` (dotted module names), or None when it may."""
        if imported == self.root:
            # The package root re-exports the top of the surface: importing it from a layer climbs above all.
            return f"{importer} imports the package root {self.root}, which stands above every layer"
        upper, lower = _subpackage(importer, self.root), _subpackage(imported, self.root)
        if upper is None or lower is None or upper == lower:
            return None
        if self.level(lower) < self.level(upper):
            return f"{importer} ({upper}) imports {imported} ({lower}), a layer above its own"
        if self.level(lower) == self.level(upper):
            return f"{importer} ({upper}) imports {imported} ({lower}), a sibling that must stay independent"
        return None


def _subpackage(module: str, root: str) -> str | None:
    parts = module.split(".")
    if parts[0] != root or len(parts) < 3:
        return None  # the root itself, or a module outside the package
    return parts[1]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(name: str) -> str:
    """The package's module that a dotted name imports (``a.b.c`` may be module ``a.b``'s attribute ``c``)."""
    parts = name.split(".")
    while parts:
        candidate = PACKAGE.parent.joinpath(*parts)
        if candidate.with_suffix(".py").exists() or (candidate / "__init__.py").exists():
            return ".".join(parts)
        parts.pop()
    raise AssertionError(f"{name} names no module of the package")


def imports_of(path: Path, root: str, importer: str | None = None) -> set[str]:
    """The package's modules ``path`` imports, wherever the import stands; ``importer`` names a module written
    elsewhere as the package's module it stands for."""
    importer = importer or _module_name(path)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # ``from a.b import c`` imports module a.b.c, or a.b when c is a name defined in it.
            names = [f"{base}.{alias.name}" for alias in node.names]
        found |= {_resolve(name) for name in names if name == root or name.startswith(root + ".")}
    found.discard(importer)
    return found


def package_imports(root: str = "airflow_sm_prefs") -> dict[str, set[str]]:
    return {_module_name(path): imports_of(path, root) for path in sorted(PACKAGE.rglob("*.py"))}


def problems(layers: Layers, graph: Mapping[str, Iterable[str]]) -> list[str]:
    return sorted(
        problem
        for importer, imported in graph.items()
        for target in imported
        if (problem := layers.problem(importer, target)) is not None
    )


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


LAYERS = Layers.from_pyproject()


def test_every_subpackage_stands_in_exactly_one_layer():
    on_disk = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    named = [name for siblings in LAYERS.order for name in siblings]
    assert len(named) == len(set(named)), f"a subpackage is named twice: {named}"
    assert set(named) == on_disk, f"not placed: {on_disk - set(named)}; no such subpackage: {set(named) - on_disk}"
    assert not [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"], "every module is in a subpackage"


def test_no_import_climbs_a_layer_or_crosses_to_a_sibling():
    assert problems(LAYERS, package_imports()) == []


def test_no_module_imports_itself_round_a_circle():
    graph = {module: imported for module, imported in package_imports().items() if module != LAYERS.root}
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("importer", "imported", "why"),
    [
        ("airflow_sm_prefs.wait.triggers", "airflow_sm_prefs.surface.operators", "a layer above"),
        ("airflow_sm_prefs.sagemaker.hooks", "airflow_sm_prefs.task.attempts", "a layer above"),
        ("airflow_sm_prefs.analysis.report", "airflow_sm_prefs.wait.polling", "a sibling"),
        ("airflow_sm_prefs.facts.job_facts", "airflow_sm_prefs.evidence.ledger", "a layer above"),
        ("airflow_sm_prefs.request.jobs", "airflow_sm_prefs.reference.prices", "a sibling"),
        ("airflow_sm_prefs.storage.paths", "airflow_sm_prefs.platform.formatting", "a sibling"),
        ("airflow_sm_prefs.surface.provider_info", "airflow_sm_prefs", "the package root"),
    ],
)
def test_the_check_refuses_an_import_upward_or_sideways(importer, imported, why):
    assert why in (LAYERS.problem(importer, imported) or "")


def test_the_check_finds_an_import_inside_a_function_and_under_type_checking(tmp_path):
    # The same reading the package gets, on a module standing for one of its layers, written outside the source
    # tree (tests that list or copy the package run beside this one).
    module = tmp_path / "_layer_probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from airflow_sm_prefs.evidence import ledger\n"
        "def f():\n    from ..surface import cli\n    import airflow_sm_prefs.task.task_life\n"
    )
    found = imports_of(module, "airflow_sm_prefs", importer="airflow_sm_prefs.storage._layer_probe")
    assert found == {
        "airflow_sm_prefs.evidence.ledger",
        "airflow_sm_prefs.surface.cli",
        "airflow_sm_prefs.task.task_life",
    }
    assert len(problems(LAYERS, {"airflow_sm_prefs.storage._layer_probe": found})) == 3


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# -- the diagram in docs/architecture.md -----------------------------------------------------------------------

DIAGRAM_START = "<!-- layers: drawn from [tool.importlinter] in pyproject.toml; tests/unit/test_layers.py checks it -->"


def diagram(layers: Layers) -> str:
    """The layers, top to bottom; siblings on one line."""
    return "```\n" + "\n    ▼\n".join(" | ".join(siblings) for siblings in layers.order) + "\n```"


def test_the_architecture_diagram_is_the_contract():
    expected = diagram(LAYERS)
    text = ARCHITECTURE.read_text()
    assert DIAGRAM_START in text, f"docs/architecture.md lacks the layers diagram; it should read:\n{expected}"
    after = text.split(DIAGRAM_START, 1)[1].lstrip("\n")
    drawn = after[: after.index("```", 3) + 3]
    assert drawn == expected, f"docs/architecture.md's layers diagram should read:\n{expected}"


# -- what a DAG file's parse loads -----------------------------------------------------------------------------

# What parsing a DAG file with an operator needs: its arguments judged (the request's rules, the preflight that
# runs without the network, the instance catalogue, the certification registry when local) and the operator's
# links, and the pure rules the operator's methods name (attempts' connection settings, a wait's event).
# Not the task's life with its job (task_life, submission), the trigger, the hook, the ledger or the evidence.
PARSE_TIME_MODULES = {
    "airflow_sm_prefs.errors.base",
    "airflow_sm_prefs.facts.record",
    "airflow_sm_prefs.platform.formatting",
    "airflow_sm_prefs.platform.redaction",
    "airflow_sm_prefs.platform.supervisor_calls",
    "airflow_sm_prefs.preflight.certification",
    "airflow_sm_prefs.preflight.certified",
    "airflow_sm_prefs.preflight.check",
    "airflow_sm_prefs.preflight.cost_caps",
    "airflow_sm_prefs.preflight.entries",
    "airflow_sm_prefs.preflight.finish_by",
    "airflow_sm_prefs.preflight.guardrails",
    "airflow_sm_prefs.preflight.known_types",
    "airflow_sm_prefs.preflight.named_plans",
    "airflow_sm_prefs.preflight.plans_first",
    "airflow_sm_prefs.preflight.quotas",
    "airflow_sm_prefs.preflight.registry",
    "airflow_sm_prefs.preflight.requirements",
    "airflow_sm_prefs.preflight.runner",
    "airflow_sm_prefs.reference.instance_catalogue",
    "airflow_sm_prefs.request.job_request",
    "airflow_sm_prefs.request.jobs",
    "airflow_sm_prefs.request.pending_limit",
    "airflow_sm_prefs.request.preferences",
    "airflow_sm_prefs.request.friendly_preferences",
    "airflow_sm_prefs.sagemaker.botocore_model",
    "airflow_sm_prefs.sagemaker.connection",
    "airflow_sm_prefs.sagemaker.job_status",
    "airflow_sm_prefs.sagemaker.job_view",
    "airflow_sm_prefs.sagemaker.training_plans",
    "airflow_sm_prefs.storage.object_storage",
    "airflow_sm_prefs.storage.paths",
    "airflow_sm_prefs.storage.user_files",
    "airflow_sm_prefs.surface.links",
    "airflow_sm_prefs.surface.operators",
    "airflow_sm_prefs.surface.provider_info",
    "airflow_sm_prefs.task.task_failures",
    "airflow_sm_prefs.wait.polling",
    "airflow_sm_prefs.wait.wait_event",
}

PARSE_A_DAG = """
import json, sys
import pendulum
from airflow.sdk import DAG
from airflow_sm_prefs import InstancePreference, SageMakerPreferenceTrainingOperator
with DAG("parse_probe", schedule=None, start_date=pendulum.datetime(2026, 12, 1, tz="UTC")):
    SageMakerPreferenceTrainingOperator(
        task_id="train",
        config={"RoleArn": "arn:aws:iam::123456789012:role/r", "AlgorithmSpecification": {"TrainingImage": "i",
                "TrainingInputMode": "File"}, "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
                "ResourceConfig": {"VolumeSizeInGB": 50}, "StoppingCondition": {"MaxRuntimeInSeconds": 3600}},
        preferences=[InstancePreference("ml.p5.48xlarge", 1), InstancePreference("ml.g5.48xlarge", 2)],
        max_hourly_cost_usd=500, finish_by="{{ data_interval_end }}",
    )
print(json.dumps({"loaded": sorted(m for m in sys.modules if m.startswith("airflow_sm_prefs.") and "." in m[17:])}))
"""


def test_parsing_a_dag_loads_only_what_judging_its_arguments_needs(tmp_path):
    loaded = set(in_a_fresh_interpreter(PARSE_A_DAG, tmp_path)["loaded"]) - {
        f"airflow_sm_prefs.{name}" for name in LAYERS.subpackages()
    }
    assert "airflow_sm_prefs.evidence.ledger" not in loaded
    assert loaded == PARSE_TIME_MODULES, (
        f"newly loaded: {loaded - PARSE_TIME_MODULES}; no longer: {PARSE_TIME_MODULES - loaded}"
    )


def test_every_error_the_package_raises_shares_one_base_exported_at_the_root():
    """A DAG author catches ``airflow_sm_prefs.SageMakerPreferencesError`` for any of them."""
    import importlib
    import inspect

    import airflow_sm_prefs
    from airflow_sm_prefs.errors.base import SageMakerPreferencesError

    assert airflow_sm_prefs.SageMakerPreferencesError is SageMakerPreferencesError
    found = []
    for module in sorted(package_imports()):
        if module == LAYERS.root:
            continue
        loaded = importlib.import_module(module)
        for name, value in vars(loaded).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module:
                found.append((module, name, issubclass(value, SageMakerPreferencesError)))
    assert len(found) >= 15
    assert [(module, name) for module, name, based in found if not based] == []
