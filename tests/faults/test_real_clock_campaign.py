"""The deferral race's campaign (tests/faults/real_clock.py) on SQLite + LocalExecutor; its row in
docs/reliability.md."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults import real_clock
from tests.faults.audit import Row
from tests.faults.report import SQLITE, collect_rows
from tests.faults.stack import ARTIFACTS_DIR, PROJECT_DIR

pytestmark = pytest.mark.airflow

ARTIFACTS = ARTIFACTS_DIR / "real-clock"


@pytest.fixture(scope="module")
def notes() -> list[str]:
    return []


@pytest.fixture(scope="module")
def rows(notes: list[str]) -> Iterator[list[Row]]:
    yield from collect_rows(SQLITE, ARTIFACTS / "stack" / "scheduler.log", notes, part="real-clock")


def test_no_task_fails_and_no_healthy_job_stops_when_jobs_move_seconds_after_the_deferral(
    rows: list[Row], notes: list[str]
) -> None:
    real_clock.campaign(
        real_clock.RealClockStack(project_dir=PROJECT_DIR, workdir=ARTIFACTS / "stack"), SQLITE.title, rows, notes
    )
