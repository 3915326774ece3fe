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


def test_no_pattern_is_anchored_with_a_dollar():
    """``re.match(r"^...$")`` lets a trailing newline through ("plan-a\\n" was sent to SageMaker): a name the
    package sends or a setting it reads is matched whole, with ``fullmatch``."""
    anchored = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) in ("compile", "match", "search")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value.endswith("$")
            ):
                anchored.append(f"{module.relative_to(PACKAGE)}:{node.lineno}")
    assert anchored == []


def test_the_kinds_differ_in_request_jobs_alone():
    """``JobKind`` holds every way training and processing differ (fields, operations, the pending limit, plans,
    the image, the metrics' namespace): elsewhere code asks the kind, never compares its name."""
    import re

    compared = re.compile(r"""[=!]=\s*["'](training|processing)["']|["'](training|processing)["']\s*[=!]=""")
    offenders = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if compared.search(path.read_text())
    )
    assert offenders == []
