"""Log streaming at scale: N running jobs writing logs, followed by N triggers in one event loop.

An emulator (in this process, its own thread; speed 1) runs N training jobs that start at once and write
log lines through a long run; N of our triggers with ``stream_logs=True`` follow them in one asyncio loop,
as a triggerer would. Over a fixed window after a warm-up it counts, from the emulator's own counters,
CloudWatch Logs calls and SageMaker calls per job per minute, and the lines shown. A second phase does the
same with N queued jobs (no capacity), which have no log streams and should cost no log calls.

Usage: python -m benchmarks.log_streaming [--jobs 200] [--window 300] [--warmup 60] [--interval 60]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from pathlib import Path

from benchmarks.scenarios import BENCH_CONNECTION, point_connection_at, publish


class CountingLog:
    def __init__(self) -> None:
        self.lines = 0

    def info(self, message: str, *args: object, **_: object) -> None:
        if message.startswith("["):
            self.lines += 1

    warning = debug = error = exception = info


async def _measure(server, jobs: int, window: float, warmup: float, interval: float) -> dict[str, float]:
    from airflow_sm_prefs.wait.log_follower import LogFollower
    from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger
    from airflow_sm_prefs.wait.watcher import JobWatcher
    from tests.helpers import GPU_PAIR, boto_client, training_request

    client = boto_client(server.endpoint_url)
    for index in range(jobs):
        client.create_training_job(**training_request(f"logging-{index}", GPU_PAIR))
    log = CountingLog()
    runs = []
    for index in range(jobs):
        trigger = SageMakerPreferenceJobTrigger(
            job_name=f"logging-{index}",
            job_kind="training",
            hook_kwargs={"aws_conn_id": BENCH_CONNECTION, "region_name": "us-east-1"},
            poll_interval=interval,
            stream_logs=True,
        )
        trigger._log = log  # type: ignore[assignment]
        runs.append(asyncio.ensure_future(trigger.run().__anext__()))
    await asyncio.sleep(warmup)
    calls_before = dict(server.engine.calls)
    lines_before = log.lines
    started = time.monotonic()
    await asyncio.sleep(window)
    minutes = (time.monotonic() - started) / 60
    calls = {k: v - calls_before.get(k, 0) for k, v in server.engine.calls.items()}
    for run in runs:
        run.cancel()
    await asyncio.gather(*runs, return_exceptions=True)
    await JobWatcher.close_all()
    await LogFollower.close_all()
    logs_calls = sum(v for k, v in calls.items() if k.startswith("Logs_"))
    sagemaker_calls = sum(v for k, v in calls.items() if not k.startswith(("Logs_", "s3.")))
    return {
        "logs": logs_calls / jobs / minutes,
        "sagemaker": sagemaker_calls / jobs / minutes,
        "lines": (log.lines - lines_before) / jobs / minutes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--window", type=float, default=300)
    parser.add_argument("--warmup", type=float, default=60)
    parser.add_argument("--interval", type=float, default=60)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    from sm_prefs_devkit.emulator import EmulatorServer, load

    rows = []
    for label, capacity in (("running, writing logs", 10_000), ("queued (no capacity)", 0)):
        scenario = dataclasses.replace(
            load("ample"),
            speed=1.0,
            default_capacity=capacity,
            runtime_seconds={"default": 100_000.0},
            startup_seconds=5.0,
            buckets={"bucket": ()},
        )
        with EmulatorServer(scenario) as server:
            point_connection_at(server.endpoint_url)
            result = asyncio.run(_measure(server, args.jobs, args.window, args.warmup, args.interval))
        rows.append(
            f"| {label} | {args.jobs} | {args.interval:.0f} s | {result['logs']:.3f} | {result['sagemaker']:.3f} | "
            f"{result['lines']:.2f} |"
        )
    table = "\n".join(
        [
            f"Log streaming, {args.jobs} jobs in one event loop, window {args.window:.0f} s after {args.warmup:.0f} s",
            "",
            "| jobs | n | check_interval | log calls / job / min | SageMaker calls / job / min "
            "| lines shown / job / min |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    publish(table, args.output)


if __name__ == "__main__":
    main()
