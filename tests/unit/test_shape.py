"""The operator stays the Airflow surface: its life with the job is task_life's, its checks preflight's."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_sm_prefs"
OPERATORS = ast.parse((PACKAGE / "surface" / "operators.py").read_text())


def _class(name: str) -> ast.ClassDef:
    return next(node for node in OPERATORS.body if isinstance(node, ast.ClassDef) and node.name == name)


def test_the_operator_class_is_under_250_lines():
    base = _class("SageMakerPreferenceBaseOperator")
    assert base.end_lineno is not None
    assert base.end_lineno - base.lineno + 1 < 250


def test_the_operator_imports_few_of_the_package_modules():
    """It was 25 of 48 when the operator ran the whole task itself; the amazon provider's SageMaker operators
    module imports 9 for 19 operators."""
    imported: set[str] = set()
    for node in ast.walk(OPERATORS):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("airflow_sm_prefs"):
            folder = PACKAGE.joinpath(*node.module.split(".")[1:])
            if folder.is_dir():  # the package or a subpackage: each name imported is a module of it
                imported |= {f"{node.module}.{alias.name}" for alias in node.names}
            else:
                imported.add(node.module)
    assert len(imported) <= 15, sorted(imported)


def test_the_operator_never_reads_a_raw_describe_response_or_event():
    """A Describe is a JobView from the moment it arrives, and an event a WaitEnded (parsed once)."""
    source = (PACKAGE / "surface" / "operators.py").read_text()
    for raw in ('event["', "event.get(", "description.get(", 'description["', "JobView.parse("):
        assert raw not in source, raw


def test_each_guardrail_check_is_a_module_of_its_own_turned_on_in_one_place():
    """A ``Check`` (a class with ``violations(kind, request)``) per module of ``preflight/``, and ``checks_for``
    the one place that names them all."""
    homes: dict[str, list[str]] = {}
    for module in sorted((PACKAGE / "preflight").glob("*.py")):
        for node in ast.parse(module.read_text()).body:
            is_protocol = isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "Protocol" for b in node.bases)
            if (
                isinstance(node, ast.ClassDef)
                and not is_protocol
                and any(isinstance(item, ast.FunctionDef) and item.name == "violations" for item in node.body)
            ):
                homes.setdefault(module.stem, []).append(node.name)
    assert all(len(checks) == 1 for checks in homes.values()), homes
    assert set(homes) == {"requirements", "cost_caps", "quotas", "plans_first"}
    guardrails = (PACKAGE / "preflight" / "guardrails.py").read_text()
    registry = guardrails.split("def checks_for(", 1)[1].split("\ndef ", 1)[0]
    for module, (check,) in homes.items():
        assert f"{module}.{check}(" in registry, f"checks_for does not turn on {module}.{check}"
