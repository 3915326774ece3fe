"""The deferral race's campaign (tests/faults/real_clock.py) on the production topology: PostgreSQL, Redis,
CeleryExecutor with two workers, two triggerers, each component a host of its own; its row in
docs/reliability.md's PostgreSQL + Celery column."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.faults import real_clock
from tests.faults.audit import Row
from tests.faults.report import PRODUCTION, collect_rows
from tests.faults.stack import ARTIFACTS_DIR, PROJECT_DIR
from tests.production.stack import ProductionTopology

pytestmark = pytest.mark.airflow

ARTIFACTS = ARTIFACTS_DIR / "production-real-clock"


@dataclass
class RealClockProductionStack(ProductionTopology, real_clock.RealClockStack):
    """The real-clock campaign's stack on the production topology."""


@pytest.fixture(scope="module")
def notes() -> list[str]:
    return []


@pytest.fixture(scope="module")
def rows(notes: list[str]) -> Iterator[list[Row]]:
    yield from collect_rows(PRODUCTION, ARTIFACTS / "stack" / "scheduler.log", notes, part="real-clock")


def test_no_task_fails_and_no_healthy_job_stops_when_jobs_move_seconds_after_the_deferral(
    rows: list[Row], notes: list[str]
) -> None:
    real_clock.campaign(
        RealClockProductionStack(project_dir=PROJECT_DIR, workdir=ARTIFACTS / "stack"), PRODUCTION.title, rows, notes
    )
