"""The README is the door (under 10 KB) and its links and its first DAG work; the rest lives in docs/, which
`make docs` builds with warnings as errors."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import IMPORT_DAGBAG
from tests.unit.test_dags import _parse_in_a_fresh_process

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()

PARSE_FIRST_DAG = (
    """
import json, sys
"""
    + IMPORT_DAGBAG
    + """
bag = DagBag(sys.argv[1])
dag = bag.dags.get("fine_tune_nightly")
task = dag.get_task("fine_tune") if dag else None
print(json.dumps({
    "errors": {k: str(v)[-1500:] for k, v in bag.import_errors.items()},
    "tasks": sorted(dag.task_ids) if dag else [],
    "preferences": task.preferences if task else None,
}))
"""
)


def test_the_readme_is_a_door_not_the_manual():
    assert len(README.encode()) < 10 * 1024, f"README is {len(README.encode())} bytes"
    for section in ("## Quick start", "## Install into your Airflow", "## A first DAG", "## Documentation"):
        assert section in README
    assert "make demo" in README and "make test" in README


def test_every_file_the_readme_links_exists():
    targets = re.findall(r"\]\(([^)#]+)\)", README)
    assert len(targets) > 10
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []


def test_the_readmes_first_dag_parses_with_its_three_preferences(tmp_path):
    code = README.split("## A first DAG", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "first_dag.py").write_text(code)
    parsed = _parse_in_a_fresh_process(PARSE_FIRST_DAG, tmp_path / "dags", tmp_path)
    assert parsed["errors"] == {}
    assert parsed["tasks"] == ["fine_tune", "plan"]
    types = [(p["InstanceType"], p["InstanceCount"]) for p in parsed["preferences"]]
    assert types == [("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g5.48xlarge", 4)]


def test_every_page_in_docs_is_in_the_sites_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert [p for p in pages if f": {p}" not in nav] == []


SHELL_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```(?:bash|sh|shell|console)\n(?P<commands>.*?)```", re.DOTALL)
VERDICT = re.compile(r"<!-- commands: (?:tested by (?P<test>tests/\S+\.py)|not run by tests[^:]*: .+) -->")


def _command_blocks() -> list[tuple[str, str, str]]:
    """Every shell block of README and docs/: (page, the line before it, its commands)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [
        (page.name, found["before"], found["commands"])
        for page in pages
        for found in SHELL_BLOCK.finditer("\n" + page.read_text())
    ]


def _commands(block: str) -> list[str]:
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_command_block_says_which_test_runs_it_or_why_none_does():
    """A command a page tells a user to run is run by a test, or the page says why not where the next writer
    sees it; a usage summary (`[--since 30d]`) is a ```text block, not commands."""
    blocks = _command_blocks()
    assert len(blocks) >= 15
    unjudged = [(page, block[:60]) for page, before, block in blocks if not VERDICT.fullmatch(before.strip())]
    assert unjudged == []
    for page, before, _ in blocks:
        test = VERDICT.fullmatch(before.strip())["test"]  # type: ignore[index]
        assert test is None or (ROOT / test).is_file(), (page, test)


def test_the_emulator_commands_of_every_page_are_the_ones_the_own_airflow_test_runs():
    from tests.integration.test_own_airflow import PAGE, TESTED_HERE, blocks_run_here

    run = {command for block in blocks_run_here(PAGE.read_text()) for command in _commands(block)}
    elsewhere = [
        command
        for page, before, block in _command_blocks()
        if before.strip() == TESTED_HERE and page != PAGE.name
        for command in _commands(block)
    ]
    assert elsewhere and [command for command in elsewhere if command not in run] == []
