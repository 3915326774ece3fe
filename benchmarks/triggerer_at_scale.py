"""Real triggerers holding N deferred mapped tasks of this provider (default 1,000), all waiting in a queue.

A real Airflow (scheduler, triggerer, DAG processor, API server, LocalExecutor on SQLite; or, with
``--production``, PostgreSQL, Redis, two Celery workers and two triggerers, as tests/production) runs one
DAG with a mapped SageMakerPreferenceTrainingOperator over N configurations against the emulator, where no GPU
has capacity and there is no pending limit. Mapped tasks cannot start from the triggerer in Airflow 3.3
(GH-52141), so each runs on a worker once, creates its job and defers. When all N are deferred,
one probe trigger per triggerer is deferred beside them and, over a fixed window, the benchmark measures:

- SageMaker calls per job per minute (the emulator's counters);
- per triggerer: the triggers it holds (its own periodic count), the CPU share of one core and resident
  memory of its process tree (supervisor + trigger runner), its "async thread was blocked" warnings;
- the event loop lag each probe saw (50 ms sleeps: p50, p99, max). Airflow places a probe on whichever
  triggerer claims it first, so the probes are not tied to a triggerer by name.

Usage: python -m benchmarks.triggerer_at_scale [--tasks 1000] [--window 180] [--production]
       [--output artifacts/triggerer.md]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.scenarios import ROOT, publish, write_scenario
from sm_prefs_devkit.local_stack import LocalStack, wait_for
from tests.production.stack import ProductionTopology

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
    for number in range(1, PROBES + 1):
        LagProbeOperator(task_id=f"probe_{number}", seconds=WINDOW)
'''
RUNNING_TRIGGERS = re.compile(r"(\d+) triggers currently running")


@dataclass
class ScaleStack(LocalStack):
    tasks: int = 1000
    window: float = 180.0
    separate_components: bool = True

    def prepare(self) -> None:
        super().prepare()
        self.dags_folder = self.workdir / "dags"
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        probes = str(len(self.triggerers))
        text = DAG_FILE.replace("TASKS", str(self.tasks)).replace("WINDOW", str(self.window)).replace("PROBES", probes)
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

    @property
    def triggerers(self) -> list[str]:
        return [name for name in self.airflow_components if name.startswith("triggerer")]

    def triggerer_log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def triggers_held(self, name: str) -> int | None:
        """The triggerer's latest count of its own running triggers (it logs one a minute)."""
        counts = RUNNING_TRIGGERS.findall(self.triggerer_log(name))
        return int(counts[-1]) if counts else None


@dataclass
class ProductionScaleStack(ProductionTopology, ScaleStack):
    """The same benchmark on PostgreSQL, Redis, two Celery workers (8 slots, as above) and two triggerers."""


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
    parser.add_argument("--production", action="store_true", help="PostgreSQL, Celery, two triggerers")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    scenario = write_scenario("triggerer_at_scale", SCENARIO)
    stack_class = ProductionScaleStack if args.production else ScaleStack
    stack = stack_class(
        project_dir=ROOT,
        workdir=ROOT / "artifacts" / ("triggerer_at_scale_production" if args.production else "triggerer_at_scale"),
        scenario=str(scenario),
        tasks=args.tasks,
        window=args.window,
    )
    with stack:
        result = _measure(stack, args.tasks, args.window)
    topology = "PostgreSQL + Celery" if args.production else "SQLite + LocalExecutor"
    publish(_table(result, args.window, topology), args.output)
    return 0


def _measure(stack: ScaleStack, tasks: int, window: float) -> dict[str, Any]:
    time.sleep(20)
    pids = {name: stack.components[name].pid for name in stack.triggerers}
    idle_rss = {name: _tree_usage(pid)[1] for name, pid in pids.items()}  # idle triggerers, for comparison
    started = time.monotonic()
    run_id = stack.trigger("triggerer_at_scale")

    def all_deferred() -> bool:
        counts = _states(stack, run_id)
        print(f"{time.monotonic() - started:6.0f} s  {counts}", flush=True)
        if counts.get("failed") or counts.get("upstream_failed"):
            raise RuntimeError(f"tasks failed while deferring: {counts}")
        return counts.get("deferred", 0) == tasks

    wait_for(all_deferred, 3600, f"{tasks} deferred tasks", every=15)
    ramp = time.monotonic() - started
    probe_run = stack.trigger("lag_probe")
    wait_for(
        lambda: all(ti["state"] == "deferred" for ti in stack.task_instances("lag_probe", probe_run)),
        300,
        "the probes to defer",
    )
    time.sleep(10)  # let the probes' triggers start before the window opens
    calls_before = stack.calls()
    cpu_before = {name: _tree_usage(pid)[0] for name, pid in pids.items()}
    blocked_before = {name: stack.triggerer_log(name).count("async thread was blocked") for name in pids}
    window_start = time.monotonic()
    rss_peak = dict.fromkeys(pids, 0.0)
    while time.monotonic() - window_start < window:
        for name, pid in pids.items():
            rss_peak[name] = max(rss_peak[name], _tree_usage(pid)[1])
        time.sleep(10)
    wall = time.monotonic() - window_start
    calls_after = stack.calls()
    cpu_after = {name: _tree_usage(pid)[0] for name, pid in pids.items()}
    calls = {op: calls_after.get(op, 0) - calls_before.get(op, 0) for op in calls_after}
    stack.wait_run_done("lag_probe", probe_run, timeout=window + 300)
    return {
        "tasks": tasks,
        "ramp_minutes": ramp / 60,
        "calls": {k: v for k, v in calls.items() if v},
        "calls_per_job_minute": sum(calls.values()) / tasks / (wall / 60),
        "triggerers": {
            name: {
                "triggers": stack.triggers_held(name),
                "cpu_share": (cpu_after[name] - cpu_before[name]) / wall,
                "rss_mb": rss_peak[name],
                "idle_rss_mb": idle_rss[name],
                "blocked_warnings": stack.triggerer_log(name).count("async thread was blocked") - blocked_before[name],
            }
            for name in pids
        },
        "lags": [
            stack.xcom("lag_probe", probe_run, ti["task_id"], "return_value") or {}
            for ti in stack.task_instances("lag_probe", probe_run)
        ],
    }


def _table(result: dict[str, Any], window: float, topology: str) -> str:
    lines = [
        f"{topology}: {result['tasks']} deferred mapped tasks ({window:.0f} s window; all {result['tasks']} deferred "
        f"after {result['ramp_minutes']:.1f} min of worker start-ups); {result['calls_per_job_minute']:.4f} SageMaker "
        "calls per job per minute over all triggerers.",
        "",
        "| triggerer | triggers held | CPU (share of a core) | RSS of its tree (MB; idle) | blocked-loop warnings |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, figures in result["triggerers"].items():
        lines.append(
            f"| {name} | {figures['triggers']} | {100 * figures['cpu_share']:.1f} % "
            f"| {figures['rss_mb']:.0f} ({figures['idle_rss_mb']:.0f}) | {figures['blocked_warnings']} |"
        )
    lags = ", ".join(
        f"{lag.get('p50_ms', 0):.1f} / {lag.get('p99_ms', 0):.1f} / {lag.get('max_ms', 0):.1f}"
        for lag in result["lags"]
    )
    lines += ["", f"Loop lag p50 / p99 / max (ms), one probe each: {lags}", ""]
    lines.append(f"Calls in the window: {result['calls']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
