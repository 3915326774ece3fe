"""How `make test` runs its layers: what the harness itself relies on."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SLOWEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_the_modules_started_first_are_process_layer_modules_that_exist():
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
    for module in SLOWEST_FIRST:
        text = (ROOT / module).read_text()
        assert "pytest.mark.airflow" in text, f"{module} is not in the process layer (-m airflow)"
