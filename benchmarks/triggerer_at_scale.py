"""A real triggerer holding N deferred mapped tasks of this provider (default 1,000), all waiting in a queue.

A real Airflow (scheduler, triggerer, DAG processor, API server, LocalExecutor; the fault campaign's stack)
runs one DAG with a mapped SageMakerPreferenceTrainingOperator over N configurations against the emulator,
where no GPU has capacity and there is no pending limit. Mapped tasks cannot start from the triggerer in
Airflow 3.3 (GH-52141), so each runs on a worker once, creates its job and defers. When all N are deferred,
a probe trigger is deferred into the same triggerer and, over a fixed window, the benchmark measures:

- SageMaker calls per job per minute (the emulator's counters);
- CPU share of one core and resident memory of the triggerer's process tree (supervisor + trigger runner);
- the triggerer event loop's lag (the probe's 50 ms sleeps: p50, p99, max);
- the triggerer's own "async thread was blocked" warnings during the window.

Usage: python -m benchmarks.triggerer_at_scale [--tasks 1000] [--window 180] [--output artifacts/triggerer.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_sm_prefs.local_stack import LocalStack, wait_for
from benchmarks.scenarios import ROOT, publish, write_scenario

SCENARIO = """
name: triggerer-at-scale
description: no GPU capacity and no pending limit, so every job waits for the whole benchmark
speed: 1
default_capacity: 32
capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 0}
behaviour: {default_max_pending_seconds: null}
"""
DAG_FILE = '''
"""Benchmark DAGs (airflow DAG file): N mapped training tasks that wait in a queue, and a loop-lag probe."""
from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
from benchmarks.lag_probe import LagProbeOperator
from tests.helpers import training_request

CONFIG = {k: v for k, v in training_request("x", None).items() if k != "TrainingJobName"}
CONFIGS = [{**CONFIG, "OutputDataConfig": {"S3OutputPath": f"s3://bucket/shard-{i}"}} for i in range(TASKS)]

with DAG("triggerer_at_scale", schedule=None, max_active_tasks=TASKS + 10, max_active_runs=1):
    SageMakerPreferenceTrainingOperator.partial(
        task_id="wait",
        preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2)],
        check_interval=60,
        retries=0,
    ).expand(config=CONFIGS)

with DAG("lag_probe", schedule=None):
    LagProbeOperator(task_id="probe", seconds=WINDOW)
'''


@dataclass
class ScaleStack(LocalStack):
    tasks: int = 1000
    window: float = 180.0
    separate_components: bool = True

    def prepare(self) -> None:
        super().prepare()
        self.dags_folder = self.workdir / "dags"
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        text = DAG_FILE.replace("TASKS", str(self.tasks)).replace("WINDOW", str(self.window))
        (self.dags_folder / "triggerer_at_scale.py").write_text(text)

    def airflow_env(self) -> dict[str, str]:
        env = super().airflow_env()
        env.update(
            {
                "AIRFLOW__CORE__PARALLELISM": "8",
                "AIRFLOW__CORE__MAX_MAP_LENGTH": str(max(1024, self.tasks)),
                "AIRFLOW__TRIGGERER__CAPACITY": str(self.tasks + 100),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                # The DAG file imports the probe and the request builder from this checkout.
                "PYTHONPATH": str(ROOT),
            }
        )
        return env


def _tree_usage(pid: int) -> tuple[float, float]:
    """CPU seconds and resident MB of a process and its descendants."""
    import psutil

    root = psutil.Process(pid)
    cpu = rss = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
            cpu += times.user + times.system
            rss += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return cpu, rss / 2**20


def _states(stack: ScaleStack, run_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    offset = 0
    while True:
        page = stack.get(f"/api/v2/dags/triggerer_at_scale/dagRuns/{run_id}/taskInstances?limit=100&offset={offset}")[
            "task_instances"
        ]
        for ti in page:
            counts[str(ti["state"])] = counts.get(str(ti["state"]), 0) + 1
        if len(page) < 100:
            return counts
        offset += 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--window", type=float, default=180.0)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    scenario = write_scenario("triggerer_at_scale", SCENARIO)
    stack = ScaleStack(
        project_dir=ROOT,
        workdir=ROOT / "artifacts" / "triggerer_at_scale",
        scenario=str(scenario),
        tasks=args.tasks,
        window=args.window,
    )
    result: dict[str, Any] = {}
    try:
        stack.start()
        time.sleep(20)
        idle_rss = _tree_usage(stack.components["triggerer"].pid)[1]  # an idle triggerer, for comparison
        started = time.monotonic()
        run_id = stack.trigger("triggerer_at_scale")

        def all_deferred() -> bool:
            counts = _states(stack, run_id)
            print(f"{time.monotonic() - started:6.0f} s  {counts}", flush=True)
            if counts.get("failed") or counts.get("upstream_failed"):
                raise RuntimeError(f"tasks failed while deferring: {counts}")
            return counts.get("deferred", 0) == args.tasks

        wait_for(all_deferred, 3600, f"{args.tasks} deferred tasks", every=15)
        ramp = time.monotonic() - started
        probe_run = stack.trigger("lag_probe")
        wait_for(
            lambda: stack.task_instances("lag_probe", probe_run)[0]["state"] == "deferred", 300, "the probe to defer"
        )
        time.sleep(10)  # let the probe's trigger start before the window opens
        triggerer = stack.components["triggerer"].pid
        calls_before, (cpu_before, _) = stack.calls(), _tree_usage(triggerer)
        log_before = (stack.workdir / "triggerer.log").read_text().count("async thread was blocked")
        window_start = time.monotonic()
        rss_samples = []
        while time.monotonic() - window_start < args.window:
            rss_samples.append(_tree_usage(triggerer)[1])
            time.sleep(10)
        wall = time.monotonic() - window_start
        calls_after, (cpu_after, rss) = stack.calls(), _tree_usage(triggerer)
        blocked = (stack.workdir / "triggerer.log").read_text().count("async thread was blocked") - log_before
        calls = {op: calls_after.get(op, 0) - calls_before.get(op, 0) for op in calls_after}
        stack.wait_run_done("lag_probe", probe_run, timeout=args.window + 300)
        lag = stack.xcom("lag_probe", probe_run, "probe", "return_value")
        result = {
            "tasks": args.tasks,
            "ramp_minutes": ramp / 60,
            "calls": {k: v for k, v in calls.items() if v},
            "calls_per_job_minute": sum(calls.values()) / args.tasks / (wall / 60),
            "cpu_share": (cpu_after - cpu_before) / wall,
            "rss_mb": max([rss, *rss_samples]),
            "idle_rss_mb": idle_rss,
            "lag": lag,
            "blocked_warnings": blocked,
        }
    finally:
        stack.stop()
    lag = result["lag"] or {}
    table = (
        f"Real triggerer, {result['tasks']} deferred mapped tasks ({args.window:.0f} s window; all "
        f"{result['tasks']} deferred after {result['ramp_minutes']:.1f} min of worker start-ups):\n\n"
        "| calls / job / min | CPU (share of a core) | RSS of the triggerer tree (MB; idle) "
        "| loop lag p50 / p99 / max (ms) | blocked-loop warnings |\n|---:|---:|---:|---:|---:|\n"
        f"| {result['calls_per_job_minute']:.3f} | {100 * result['cpu_share']:.1f} % "
        f"| {result['rss_mb']:.0f} ({result['idle_rss_mb']:.0f}) "
        f"| {lag.get('p50_ms', 0):.1f} / {lag.get('p99_ms', 0):.1f} / {lag.get('max_ms', 0):.1f} "
        f"| {result['blocked_warnings']} |\n\nCalls in the window: {result['calls']}\n"
    )
    publish(table, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
