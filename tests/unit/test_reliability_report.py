"""docs/reliability.md puts the two campaigns side by side; each campaign refreshes only its own column."""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults.audit import Row
from tests.faults.report import PRODUCTION, SQLITE, CampaignResult, publish


def _row(scenario: str, faults: str = "SIGKILL", problems: list[str] | None = None) -> Row:
    return Row(scenario, faults, jobs=2, tasks_ok=2, tasks=2, recorded=2, to_record=2, problems=problems or [])


def test_each_campaign_fills_its_own_column_and_keeps_the_others(tmp_path: Path) -> None:
    page = tmp_path / "reliability.md"
    publish(SQLITE, CampaignResult([_row("2. triggerer killed"), _row("10. invalid inputs")], 5.5, 3, []), page)
    publish(
        PRODUCTION, CampaignResult([_row("2c. one of two triggerers killed"), _row("2. triggerer killed")], 6, 1), page
    )

    text = page.read_text()
    header = "| scenario | faults injected | SQLite + LocalExecutor | PostgreSQL + Celery |"
    assert header in text
    rows = [line for line in text.splitlines() if line.startswith("| 2") or line.startswith("| 10")]
    # Ordered by scenario number (2 < 2c < 10), each with a cell per topology.
    assert [row.split(" | ")[0] for row in rows] == [
        "| 2. triggerer killed",
        "| 2c. one of two triggerers killed",
        "| 10. invalid inputs",
    ]
    assert rows[0].count("ok: jobs 2, duplicates 0, orphans 0, tasks 2/2, recorded 2/2") == 2
    assert "not run here" in rows[1].split(" | ")[2] and "ok:" in rows[1].split(" | ")[3]
    assert "not run here" in rows[2].split(" | ")[3]
    assert "## SQLite + LocalExecutor" in text and "## PostgreSQL + Celery" in text

    # A second SQLite run replaces the SQLite results only.
    publish(SQLITE, CampaignResult([_row("2. triggerer killed", problems=["2 jobs"])], 4.0, 0), page)
    stored = json.loads(page.with_suffix(".json").read_text())
    assert [row["scenario"] for row in stored["sqlite"]["rows"]] == ["2. triggerer killed"]
    assert [row["scenario"] for row in stored["production"]["rows"]] == [
        "2c. one of two triggerers killed",
        "2. triggerer killed",
    ]
    text = page.read_text()
    assert "**problems**" in text and "- 2. triggerer killed: 2 jobs" in text
    assert "10. invalid inputs" not in text


def test_a_campaign_of_its_own_joins_its_topologys_column_and_survives_the_main_campaigns_runs(tmp_path: Path) -> None:
    """The real-clock campaign runs in a module of its own: its row sits in the same column, and a later run of
    the main campaign (or of itself) replaces only its own part."""
    page = tmp_path / "reliability.md"
    publish(SQLITE, CampaignResult([_row("2. triggerer killed")], 5.0, 1, ["main note"]), page)
    publish(SQLITE, CampaignResult([_row("11. the race")], 4.0, 0, ["window note"]), page, "real-clock")
    publish(SQLITE, CampaignResult([_row("2. triggerer killed")], 5.5, 2, ["main note again"]), page)

    text = page.read_text()
    rows = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| 2") or line.startswith("| 11")]
    assert rows == ["| 2. triggerer killed", "| 11. the race"]
    assert text.count("## SQLite + LocalExecutor") == 1
    assert "Campaign wall time on this machine: 5.5 min." in text
    assert "The real-clock campaign's wall time on this machine: 4.0 min." in text
    assert "window note" in text and "main note again" in text and "main note\n" not in text
    assert set(json.loads(page.with_suffix(".json").read_text())) == {"sqlite", "sqlite/real-clock"}
