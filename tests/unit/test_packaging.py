"""What the runtime wheel declares is what its code imports: no package it needs left to chance (another
package's dependency that may change), none it does not need pulled into every Airflow image."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DEVKIT = tomllib.loads((ROOT / "devkit" / "pyproject.toml").read_text())["project"]
RUNTIME_EXTRAS = ("s3", "openlineage")
# Declared for its floor alone, as the comment beside it in pyproject.toml says.
DECLARED_FOR_A_FLOOR = {"boto3"}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()  # type: ignore[union-attr]


def _imported_modules(package: Path) -> set[str]:
    found = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    own = package.name
    return {m for m in found if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != own}


def _distribution(module: str) -> str:
    """The distribution a module comes from: Airflow's providers by their package, the rest by top level."""
    parts = module.split(".")
    if parts[:2] == ["airflow", "providers"]:
        for depth in (4, 3):  # airflow.providers.common.compat before airflow.providers.common
            name = "apache-airflow-providers-" + "-".join(parts[2:depth])
            try:
                importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            return name
        raise AssertionError(f"no installed distribution provides {module}")
    if parts[0] == "airflow":
        return "apache-airflow"
    return _name(importlib.metadata.packages_distributions()[parts[0]][0])


def test_the_runtime_declares_what_it_imports_and_imports_what_it_declares():
    declared = {_name(r) for r in PROJECT["dependencies"]}
    declared |= {_name(r) for extra in RUNTIME_EXTRAS for r in PROJECT["optional-dependencies"][extra]}
    imported = {_distribution(module) for module in _imported_modules(ROOT / "airflow_sm_prefs")}
    assert imported - declared == set(), "imported by the runtime, declared nowhere"
    assert declared - imported - DECLARED_FOR_A_FLOOR == set(), "declared, never imported"


def test_the_development_kit_declares_what_it_imports_beyond_the_runtime():
    own = {_name(r) for r in DEVKIT["dependencies"]}
    imported = {_distribution(module) for module in _imported_modules(ROOT / "devkit" / "sm_prefs_devkit")}
    imported.discard("airflow-sm-prefs")  # the runtime, pinned to its own version
    runtime = {_name(r) for r in PROJECT["dependencies"]}
    assert imported - own - runtime == set(), "imported by the kit, declared nowhere"
    assert own - imported - {"airflow-sm-prefs"} == set(), "declared by the kit, never imported"
