"""The capacity report over a large ledger: 100 DAGs x 1,000 nights (100,000 jobs) by default.

Writes the ledger afresh (local folder, one entry per job, as tasks write it), then, in a fresh process each,
measures, after the imports (a running API server has them): reading the ledger and summarizing it (what
`airflow-sm-prefs report` does), the Capacity page's JSON route and its HTML page through its FastAPI app
(auth stubbed to a user who may read every DAG), `advise` for one task and `weather`. Then it compacts the
ledger (`airflow-sm-prefs ledger compact`, every entry older than a day into one file per DAG and month) and
measures them again. Reports, against the goal (2 s, 200 MB): how soon the first answer came and what it was (the
page is computed in the background: a request past its budget gets the last page, or one saying the report is
being computed), how long until the full, current result, and the memory the work adds.

Usage: python -m benchmarks.report_at_scale [--dags 100] [--nights 1000] [--ledger DIR] [--output FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.scenarios import ROOT, publish

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
from unittest import mock


def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


root = Path(sys.argv[1]); what = sys.argv[2]
from airflow_sm_prefs.surface import capacity_page
from airflow_sm_prefs.analysis import report
from airflow_sm_prefs.evidence import ledger, ledger_entry, ledger_reading, ledger_writing
if what != "report" and what not in ("advise", "weather"):
    from fastapi.testclient import TestClient
    from tests.helpers import capacity_app_for
    dags = {p.name for p in root.iterdir()}
    client = TestClient(capacity_app_for(dags))
before = rss_mb()  # the process with everything imported, as an API server is
started = time.perf_counter()
if what == "report":
    reading = ledger_reading.read(root, fields=ledger_entry.REPORT_FIELDS)
    count = sum(r["runs"] for r in report.summarize(reading.entries))
elif what == "advise":
    from airflow_sm_prefs.analysis import advisor
    from airflow_sm_prefs.analysis.counterfactual import Timeline
    entries = ledger_reading.read(root, fields=ledger_entry.REPORT_FIELDS).entries
    history = [e for e in entries if (e["dag_id"], e["task_id"]) == ("pipeline_000", "fine_tune")]
    count = len(entries) if advisor.advise(history, Timeline(entries))["candidates"] else 0
elif what == "weather":
    from airflow_sm_prefs.analysis import weather
    entries = ledger_reading.read(root, fields=ledger_entry.REPORT_FIELDS).entries
    count = len(entries) if weather.weather(entries) else 0
else:
    route = "/capacity/report" if what.startswith("route") else "/capacity"
    with mock.patch.object(capacity_page, "readable_dags", lambda user: dags), \
         mock.patch.object(ledger, "location", lambda: root):
        answer = client.get(route)
        if what.endswith("-again") or what.endswith("-after-a-job"):
            if what.endswith("-after-a-job"):  # one more job of one DAG ends: its folder changes
                some = next(root.glob("*/*.json"), None) or next(root.glob("*/compacted/*.jsonl"))
                ledger_writing.write({**json.loads(some.read_text().splitlines()[0]), "job_name": "one-more-job"}, root)
            if route == "/capacity":  # the first visit's page, however long it takes, as a user reloading gets it
                while "being computed" in answer.text:
                    time.sleep(0.2)
                    answer = client.get(route)
            started = time.perf_counter()  # the API server already answered once: what a later visit costs
            answer = client.get(route)
        answered = time.perf_counter() - started
        kind = "fresh"
        if "being computed" in answer.text or "As computed at" in answer.text:
            kind = "computing" if "being computed" in answer.text else "the last page"
        while route == "/capacity" and kind != "fresh" and (
            "being computed" in answer.text or "As computed at" in answer.text
        ):  # reloading, as the page asks, until the newer page is served
            time.sleep(0.2)
            answer = client.get(route)
        for added in root.glob("*/one-more-job.*json"):  # <job>.<region>.json
            added.unlink()
    assert answer.status_code == 200, answer.text[:500]
    # The page: one row per DAG's task, each with its runs in the second cell.
    count = sum(r["runs"] for r in answer.json()) if what.startswith("route") else sum(
        int(cell.split("</td><td>", 1)[1].split("<", 1)[0]) for cell in answer.text.split("<tr><td>")[1:]
        if "</td><td>" in cell and cell.split("</td><td>", 1)[1].split("<", 1)[0].isdigit()
    )
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if what in ("report", "advise", "weather"):
    answered, kind = seconds, "the result"
print(json.dumps({"seconds": seconds, "answered": answered, "kind": kind, "added_mb": peak - before, "jobs": count}))
"""


def write_ledger(root: Path, dags: int, nights: int) -> None:
    from airflow_sm_prefs.evidence import ledger_writing
    from tests.unit.test_report import entry

    for dag in range(dags):
        for night in range(nights):
            rank = 0 if night % 3 else 1
            record = {
                **entry(f"job-{dag}-{night}", rank, pending=60.0 * (night % 7), run=3000.0 + night % 50),
                "dag_id": f"pipeline_{dag:03d}",
                "created_at": f"2024-{1 + night % 12:02d}-{1 + night % 28:02d}T02:00:00+00:00",
            }
            ledger_writing.write(record, root)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dags", type=int, default=100)
    parser.add_argument("--nights", type=int, default=1000)
    parser.add_argument("--ledger", type=Path, default=ROOT / "artifacts" / "report_at_scale" / "ledger")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    expected = args.dags * args.nights
    if args.ledger.exists():
        shutil.rmtree(args.ledger)
    started = time.perf_counter()
    write_ledger(args.ledger, args.dags, args.nights)
    print(f"wrote {expected} entries in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows = []
    for layout in ("one file per job", "compacted"):
        if layout == "compacted":
            from airflow_sm_prefs.evidence import ledger_compaction

            started = time.perf_counter()
            folded = ledger_compaction.compact(args.ledger, older_than=dt.timedelta(0)).folded
            rows.append(
                f"| `ledger compact` (once; then daily for a day's jobs) | {folded:,} | | | "
                f"{time.perf_counter() - started:.1f} s | |"
            )
        measured_here = (
            ("report", "read + summarize (`report`)"),
            ("route", "Capacity JSON route"),
            ("page", "Capacity page (HTML, charts per task)"),
            ("route-again", "Capacity JSON route asked again, ledger unchanged"),
            ("page-again", "Capacity page asked again, ledger unchanged"),
            ("page-after-a-job", "Capacity page asked again after one more job ended"),
            ("advise", "read + `advise` for one task"),
            ("weather", "read + `weather`"),
        )
        for what, label in measured_here:
            result = subprocess.run(
                [sys.executable, "-c", MEASURE, str(args.ledger), what],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,  # the tests' stand-in for the auth manager (tests/helpers.py)
            )
            measured = json.loads(result.stdout.strip().splitlines()[-1])
            assert measured["jobs"] == expected + what.endswith("-after-a-job"), measured
            rows.append(
                f"| {label}, {layout} | {expected:,} | {measured['answered']:.2f} s | {measured['kind']} | "
                f"{measured['seconds']:.2f} s | {measured['added_mb']:.0f} MB |"
            )
    table = "\n".join(
        [
            f"Capacity report over {expected:,} ledger entries ({args.dags} DAGs x {args.nights} nights); "
            "goal 2 s, 200 MB",
            "",
            "| what | jobs | first answer | answered with | until the full, current result | memory it adds (peak "
            "over the warm process) |",
            "|---|---:|---:|---|---:|---:|",
            *rows,
        ]
    )
    publish(table, args.output)


if __name__ == "__main__":
    main()
