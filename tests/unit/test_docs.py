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
