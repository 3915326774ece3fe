"""docs/reliability.md: the fault campaign on both topologies, side by side.

Each campaign (tests/faults on SQLite + LocalExecutor, tests/production on PostgreSQL + Celery) keeps its
results under its own key in ``reliability.json`` beside the page, then renders the page from every key, so
running one campaign refreshes its column and keeps the other's last results. A campaign of its own on a
topology (the real-clock one: ``part``) has a key of its own too, and its rows join that topology's column.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.audit import Row, airflow_races
from tests.faults.stack import ARTIFACTS_DIR


@dataclass(frozen=True)
class Topology:
    key: str
    title: str
    generated_by: str


SQLITE = Topology(
    "sqlite",
    "SQLite + LocalExecutor",
    "`make faults` (tests/faults): SQLite, scheduler, one triggerer, DAG processor, API server, LocalExecutor",
)
PRODUCTION = Topology(
    "production",
    "PostgreSQL + Celery",
    "`make production-faults` (tests/production): PostgreSQL, Redis, CeleryExecutor with two workers, two "
    "triggerers, scheduler, DAG processor, API server (the compose file's services)",
)
TOPOLOGIES = (SQLITE, PRODUCTION)


@dataclass
class CampaignResult:
    rows: list[Row]
    minutes: float
    races: int
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CampaignResult:
        return cls([Row(**row) for row in data["rows"]], data["minutes"], data["races"], data["notes"])


def publish(topology: Topology, result: CampaignResult, page: Path, part: str = "") -> None:
    """Store one campaign's results beside ``page`` (``reliability.json``) and render the page from all."""
    store = page.with_suffix(".json")
    page.parent.mkdir(parents=True, exist_ok=True)
    # Both campaigns may end at once (test modules run in parallel): one read-merge-write at a time.
    with open(Path(tempfile.gettempdir()) / "airflow-sm-prefs-reliability.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.loads(store.read_text()) if store.exists() else {}
        results[f"{topology.key}/{part}" if part else topology.key] = asdict(result)
        store.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        rendered = {
            t: [
                (key.partition("/")[2], CampaignResult.from_json(value))
                for key, value in sorted(results.items())
                if key.partition("/")[0] == t.key
            ]
            for t in TOPOLOGIES
        }
        page.write_text(render({t: parts for t, parts in rendered.items() if parts}))


def collect_rows(topology: Topology, scheduler_log: Path, notes: list[str], part: str = "") -> Iterator[list[Row]]:
    """A campaign module's ``rows`` fixture: its scenarios append their rows, and when the module ends the
    results go to reliability.md in the environment's artifacts folder (and to SM_PREFS_RELIABILITY_REPORT,
    docs/reliability.md under `make faults` and `make production-faults`)."""
    collected: list[Row] = []
    started = time.monotonic()
    yield collected
    result = CampaignResult(collected, (time.monotonic() - started) / 60, airflow_races(scheduler_log), notes)
    pages = [ARTIFACTS_DIR / "reliability.md", os.environ.get("SM_PREFS_RELIABILITY_REPORT")]
    for page in filter(None, pages):
        publish(topology, result, Path(page), part)


def _order(scenario: str) -> tuple[int, str]:
    match = re.match(r"(\d+)([a-z]?)\.", scenario)
    return (int(match.group(1)), match.group(2)) if match else (1_000, scenario)


def _cell(row: Row | None) -> str:
    if row is None:
        return "not run here"
    recorded = f"{row.recorded}/{row.to_record}" if row.to_record else "n/a"
    verdict = "**problems**" if row.problems else "ok"
    return (
        f"{verdict}: jobs {row.jobs}, duplicates {row.duplicates}, orphans {row.orphans}, tasks "
        f"{row.tasks_ok}/{row.tasks}, recorded {recorded}"
    )


def render(results: dict[Topology, list[tuple[str, CampaignResult]]]) -> str:
    """The page, from each topology's campaigns: the main one (part ``""``) and any of its own."""
    by_topology = {t: {row.scenario: row for _, result in parts for row in result.rows} for t, parts in results.items()}
    scenarios: dict[str, str] = {}
    for rows in by_topology.values():
        for row in rows.values():
            scenarios.setdefault(row.scenario, row.faults)
    lines = [
        "# Reliability: the fault campaign, on two topologies",
        "",
        "A real Airflow against the emulator, one injected fault per scenario, then an audit from the emulator's "
        "own job list (jobs are matched to task instances by their `airflow:*` tags). A duplicate is a job "
        "beyond the generations the scenario asked for; an orphan is a job still queued or running whose task "
        'is not; "recorded" counts the chosen configurations found in the tasks\' XComs. Each column comes from '
        "its own command, and `make test` runs both (scenario 10 at 20 task instances a topology there, beside "
        "the rest of the suite; the figures below are the commands' 100):",
        "",
        *[f"- **{t.title}**: {t.generated_by}." for t in results],
        "",
        "What each reader and writer of the shared store (`[sm_prefs] storage`) does when that store refuses, "
        "stalls, resets, denies, fails or cuts its answers short is on its own page, held by its own tests: "
        "[the shared store when it fails](shared-store.md).",
        "",
        "| scenario | faults injected | " + " | ".join(t.title for t in results) + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for scenario in sorted(scenarios, key=_order):
        cells = " | ".join(_cell(by_topology[t].get(scenario)) for t in results)
        lines.append(f"| {scenario} | {scenarios[scenario]} | {cells} |")
    for topology, parts in results.items():
        lines += ["", f"## {topology.title}"]
        for part, result in parts:
            campaign = "Campaign" if not part else f"The {part} campaign's"
            lines += ["", f"{campaign} wall time on this machine: {result.minutes:.1f} min."]
            lines += [
                "",
                f"Besides the injected faults, Airflow itself failed a try this many times during the run: "
                f"**{result.races}** (the scheduler log's \"finished with state success, but the task instance's "
                "state attribute is ...\": the executor event of a deferral arrives after the trigger's event, and "
                "the scheduler fails the resumed try; apache/airflow#66374, #67287, #71580). Each such retry must "
                "reattach to the same job; the table above is the proof that it did.",
            ]
            problems = [f"- {row.scenario}: {problem}" for row in result.rows for problem in row.problems]
            if problems:
                lines += ["", "Problems found:", *problems]
            for note in result.notes:
                lines += ["", note]
    return "\n".join(lines) + "\n"
