"""Start latency: from capacity becoming free to the task knowing its selection, ours against retry-and-cancel.

A real Airflow (scheduler, triggerer, DAG processor, API server; the fault campaign's stack) runs the two
DAGs of dags/migration_example.py against the emulator, every GPU type busy. Once the job waits (the old
way 20 to 30 s into its patience, at random), the benchmark frees capacity and measures until the task
knows what it got:

- new way: the `selection` XCom's timestamp (the trigger saw the choice, the task resumed and pushed it);
- old way: the task log's "capacity found on ..." line.

Case A frees the first choice (ml.p5.48xlarge), which the old way is already waiting on. Case B frees only
the second choice (ml.p4d.24xlarge x2): the old way notices when its patience runs out and the retry
creates a job there. The example's patience is 15 minutes; here it is shortened to PATIENCE seconds so a
run takes minutes (the old way's case-B latency grows one for one with it).

Usage: python -m benchmarks.start_latency [--repeats 3] [--patience 60] [--output artifacts/start_latency.md]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pendulum

from benchmarks.scenarios import ROOT, publish, write_scenario
from sm_prefs_devkit.local_stack import LocalStack, wait_for

SCENARIO = """
name: start-latency
description: every GPU type busy until the benchmark frees one
speed: 60
default_capacity: 32
capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 0, ml.g5.48xlarge: 0}
runtime_seconds: {default: 300}
buckets: {sm-prefs-demo: []}
"""
BUSY = {"ml.p5.48xlarge": 0, "ml.p4d.24xlarge": 0, "ml.g5.48xlarge": 0}
CASES = {"A: first choice frees": {"ml.p5.48xlarge": 1}, "B: second choice frees": {"ml.p4d.24xlarge": 2}}
WAYS = {"old": "fine_tune_old_way", "new": "fine_tune_new_way"}
HEAD_START = 20.0


@dataclass
class LatencyStack(LocalStack):
    patience: int = 60
    separate_components: bool = True
    extra_env: dict[str, str] = field(default_factory=lambda: {"AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False"})

    def prepare(self) -> None:
        super().prepare()
        self.dags_folder = self.workdir / "dags"
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        source = (ROOT / "dags" / "migration_example.py").read_text()
        assert "PATIENCE_SECONDS = 15 * 60" in source
        (self.dags_folder / "migration_example.py").write_text(
            source.replace("PATIENCE_SECONDS = 15 * 60", f"PATIENCE_SECONDS = {self.patience}")
        )


def _log_time(stack: LatencyStack, dag_id: str, run_id: str, needle: str) -> float | None:
    import json

    folder = stack.airflow_home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=fine_tune"
    for path in sorted(folder.glob("attempt=*.log")):
        for line in path.read_text().splitlines():
            if needle in line:
                return pendulum.parse(json.loads(line)["timestamp"]).timestamp()  # type: ignore[union-attr]
    return None


def _selection_time(stack: LatencyStack, run_id: str) -> float | None:
    import urllib.parse

    run = urllib.parse.quote(run_id, safe="")
    path = f"/api/v2/dags/fine_tune_new_way/dagRuns/{run}/taskInstances/fine_tune/xcomEntries/selection"
    try:
        entry = stack.get(path)
    except Exception:
        return None
    return pendulum.parse(entry["timestamp"]).timestamp()  # type: ignore[union-attr]


def _waiting(stack: LatencyStack, way: str, dag_id: str, run_id: str) -> bool:
    jobs = [j for j in stack.jobs() if j["status"] == "InProgress" and j["selected"] is None]
    if not jobs:
        return False
    (ti,) = stack.task_instances(dag_id, run_id)
    return bool(ti["state"] == ("deferred" if way == "new" else "running"))


def measure(stack: LatencyStack, way: str, capacity: dict[str, int]) -> float:
    dag_id = WAYS[way]
    stack.set_capacity(BUSY)
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _waiting(stack, way, dag_id, run_id), 180, f"{dag_id} to wait for capacity", every=0.5)
    # A random phase, so capacity does not always free just after (or before) a poll of either way.
    time.sleep(HEAD_START + random.uniform(0, 10))
    freed = time.time()
    stack.set_capacity(capacity)
    if way == "new":
        known = wait_for(lambda: _selection_time(stack, run_id), 600, "the selection XCom", every=0.5)
    else:
        known = wait_for(
            lambda: _log_time(stack, dag_id, run_id, "capacity found on"),
            600,
            "the old way to find capacity",
            every=0.5,
        )
    stack.wait_run_done(dag_id, run_id, timeout=600)
    return known - freed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--patience", type=int, default=60)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    scenario = write_scenario("start_latency", SCENARIO)
    stack = LatencyStack(
        project_dir=ROOT, workdir=ROOT / "artifacts" / "start_latency", scenario=str(scenario), patience=args.patience
    )
    results: dict[tuple[str, str], list[float]] = {}
    with stack:
        for case, capacity in CASES.items():
            for way in WAYS:
                for _ in range(args.repeats):
                    latency = measure(stack, way, capacity)
                    results.setdefault((case, way), []).append(latency)
                    print(f"{case:24} {way}: {latency:6.1f} s", flush=True)
    lines = [
        f"Start latency, seconds from capacity becoming free to the task knowing its selection "
        f"(real Airflow, {args.repeats} runs each, old way's patience {args.patience} s, new way check_interval 5 s):",
        "",
        "| case | retry-and-cancel (old way) median [min, max] | airflow-sm-prefs (new way) median [min, max] |",
        "|---|---:|---:|",
    ]
    for case in CASES:
        cells = []
        for way in WAYS:
            values = results[(case, way)]
            cells.append(f"{statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]")
        lines.append(f"| {case} | {cells[0]} | {cells[1]} |")
    table = "\n".join(lines) + "\n"
    publish(table, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
