"""docs/operators.md's parameter table is the operators' signature: every argument named once, none the
operators lack, and each default the table states as a value the one the code has."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from airflow_sm_prefs.surface.operators import (
    SageMakerPreferenceProcessingOperator,
    SageMakerPreferenceTrainingOperator,
)

TABLE = Path(__file__).resolve().parents[2] / "docs" / "operators.md"


def _documented() -> dict[str, str]:
    """Each parameter the table names, with its default cell (one cell may name several parameters)."""
    text = TABLE.read_text()
    section = text.split("## Parameters (both operators)", 1)[1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z_]+)`", cells[0])
        defaults = [part.strip() for part in cells[1].split(",")]
        for index, name in enumerate(names):
            found[name] = defaults[index] if len(defaults) == len(names) else cells[1]
    return found


@pytest.mark.parametrize("operator", [SageMakerPreferenceTrainingOperator, SageMakerPreferenceProcessingOperator])
def test_the_table_names_every_argument_and_its_default(operator):
    parameters = {
        name: parameter
        for name, parameter in inspect.signature(operator.__init__).parameters.items()
        if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD
    }
    documented = _documented()
    assert set(documented) == set(parameters)
    for name, parameter in parameters.items():
        cell = documented[name]
        if parameter.default is inspect.Parameter.empty:
            assert cell == "required", name
        elif cell.startswith("`"):  # a value: the code's, exactly
            assert ast.literal_eval(cell.strip("`")) == parameter.default, (name, cell, parameter.default)
