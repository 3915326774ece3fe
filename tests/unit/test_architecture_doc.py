"""docs/architecture.md is true to the code: every module its tables name exists, and every module is named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _named(section: str) -> set[str]:
    """The backticked names in the first column of the module table under ``section``'s heading."""
    text = DOC if section == "" else DOC.split(f"## {section}", 1)[1]
    table = text.split("| module | what it holds |", 1)[1].split("\n\n", 1)[0]
    names: set[str] = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            names |= set(re.findall(r"`([a-z0-9_]+)/?`", row.split("|")[1]))
    return names


def _modules(folder: Path) -> set[str]:
    found = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    return found | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}


SUBPACKAGES = sorted(p.name for p in (ROOT / "airflow_sm_prefs").iterdir() if (p / "__init__.py").exists())


def test_every_subpackage_is_named_and_every_name_is_a_subpackage():
    named = _named("")
    assert named == _modules(ROOT / "airflow_sm_prefs") == set(SUBPACKAGES), "update docs/architecture.md"


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_every_module_of_a_subpackage_is_named_and_every_name_is_a_module(subpackage):
    assert _named(f"`{subpackage}/`:") == _modules(ROOT / "airflow_sm_prefs" / subpackage)


def test_every_development_kit_module_is_named_and_every_name_is_a_module():
    assert _named("The development kit") == _modules(ROOT / "devkit" / "sm_prefs_devkit")


def test_every_emulator_module_is_named_and_every_name_is_a_module():
    assert _named("The emulator") == _modules(ROOT / "devkit" / "sm_prefs_devkit" / "emulator")
