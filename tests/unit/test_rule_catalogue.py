"""Every rule id an error message can cite is explained in docs/rules.md, which ships with the project."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import airflow_sm_prefs
from airflow_sm_prefs.request import preferences
from tests import validation_cases

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"\[([RP]\d{1,2}[a-d]?(?:/[RP]\d{1,2}[a-d]?)*)\]")


def _catalogue() -> set[str]:
    rows = (ROOT / "docs" / "rules.md").read_text().splitlines()
    return {match.group(1) for row in rows if (match := re.match(r"\| ([RP]\d{1,2}[a-d]?) \|", row))}


def _cited_in_source() -> set[str]:
    """Ids in bracketed citations of the package's string literals, and the list rules' composed ids."""
    ids: set[str] = set()
    for path in Path(airflow_sm_prefs.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for citation in CITED.findall(node.value):
                    ids.update(citation.split("/"))
    for rules in (preferences._TRAINING, preferences._PROCESSING):
        # Count problems cite the kind's count rule, with b/c/d for the three ways counts disagree.
        ids |= {rules.duplicate_rule, rules.size_rule, rules.count_rule}
        ids |= {rules.count_rule + suffix for suffix in "bcd"}
    return ids


def test_every_rule_id_the_code_can_cite_is_in_the_catalogue():
    cited = _cited_in_source()
    assert {"R1", "R4a", "R4b", "P5b", "P9", "R19"} <= cited, "the scan finds the ids the messages use"
    assert cited - _catalogue() == set()


def test_every_id_in_an_actual_error_message_is_in_the_catalogue():
    seen: set[str] = set()
    checks = [
        (validation_cases.TRAINING_CASES, preferences.validate_training_request),
        (validation_cases.PROCESSING_CASES, preferences.validate_processing_request),
    ]
    for cases, validate in checks:
        for request, _ in cases.values():
            try:
                validate(request)
            except preferences.RequestValidationError as error:
                for citation in CITED.findall(str(error)):
                    seen.update(citation.split("/"))
    assert len(seen) > 20, "the shared validation cases make the validator cite most rules"
    assert seen - _catalogue() == set()


def test_the_readme_links_the_catalogue():
    assert "docs/rules.md" in (ROOT / "README.md").read_text()
