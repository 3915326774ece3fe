from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def ledger_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own capacity ledger. A task reads its own history there (finish_by's expected run times), so
    a job an earlier test in the same worker completed must not decide what this one's task plans (it did, in
    an order pytest-xdist chose under load: "the longest expected run kept: 5m20s", an earlier test's job)."""
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    return tmp_path / "ledger"
