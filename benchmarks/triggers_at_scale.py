"""Waiting at scale: N queued jobs in one event loop, our trigger against the amazon provider's SageMakerTrigger.

For each N and each trigger, a fresh emulator process holds N training jobs that stay Pending (no GPU
capacity, no pending limit), and a separate load process runs N triggers in one asyncio loop, as a triggerer
would. After a warm-up, it measures over a fixed window: SageMaker calls per job per minute (from the
emulator's own counters), CPU share of one core and resident memory of the load process, and event-loop
lag p99 (a probe sleeping 50 ms). Also: the import overhead of the operators over `airflow.sdk`.

Usage: python -m benchmarks.triggers_at_scale [--sizes 100,1000,3000] [--window 120] [--warmup 30]
                                             [--safety-net SECONDS]
--safety-net shortens the watcher's half-hourly sweep so a window of minutes holds several (their cost is
then overstated, never hidden). Halfway through the window one job gets capacity: the delay from that change
to its trigger's event is reported too.
Writes a Markdown table to stdout (and to --output if given).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scenarios import publish
from sm_prefs_devkit.local_stack import control, emulator_command
from sm_prefs_devkit.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = """
name: bench-all-queued
description: every GPU family busy and no pending limit, so every job waits for the whole benchmark
speed: 1
default_capacity: 0
behaviour: {default_max_pending_seconds: null}
"""
PREFERENCES = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]


def _start_emulator(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    scenario = workdir / "scenario.yaml"
    scenario.write_text(SCENARIO)
    port = free_port()
    process = subprocess.Popen(emulator_command(scenario, port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            control(url, "health")
            return process, url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("emulator did not start")


def _create_jobs(url: str, count: int) -> dict[str, dict]:
    """Create the jobs and return, per job, what the operator knows when it defers (from its Describe)."""
    import boto3

    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.job_view import JobView
    from airflow_sm_prefs.wait.watcher import KnownState
    from tests.helpers import CREDENTIALS, training_request

    client = boto3.client("sagemaker", endpoint_url=url, **CREDENTIALS)
    known = {}
    for name in (f"bench-{i}" for i in range(count)):
        client.create_training_job(**training_request(name, PREFERENCES))
        view = JobView.parse(TRAINING, client.describe_training_job(TrainingJobName=name))
        known[name] = KnownState.of(view).to_json()
    return known


# -- the load process -------------------------------------------------------------------------------------


async def _load(
    impl: str, url: str, known: dict[str, dict], warmup: float, window: float, safety_net: float | None = None
) -> dict:
    import resource

    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.wait import watcher

    if safety_net:
        watcher.SAFETY_NET_SECONDS = safety_net

    if impl == "ours":
        from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger

        # As the operator defers them (check_interval=60), seeded with its last Describe.
        triggers = [
            SageMakerPreferenceJobTrigger(
                job_name=name,
                job_kind=TRAINING.name,
                hook_kwargs={"aws_conn_id": "bench", "region_name": "us-east-1"},
                wait_for="selection",
                poll_interval=60,
                known_state=state,
            )
            for name, state in known.items()
        ]
    else:
        from airflow.providers.amazon.aws.triggers.sagemaker import SageMakerTrigger

        # As SageMakerTrainingOperator(deferrable=True) defers with its defaults (check_interval=30).
        triggers = [
            SageMakerTrigger(
                job_name=name, job_type="training", waiter_delay=30, waiter_max_attempts=10_000, aws_conn_id="bench"
            )
            for name in known
        ]

    lags: list[float] = []
    measuring = False

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(0.05)
            if measuring:
                lags.append(loop.time() - started - 0.05)

    probe_task = asyncio.ensure_future(probe())
    tasks = [asyncio.ensure_future(trigger.run().__anext__()) for trigger in triggers]
    done_at: list[float] = []
    for task in tasks:
        task.add_done_callback(lambda _, done_at=done_at: done_at.append(time.monotonic()))
    await asyncio.sleep(warmup)
    calls_before = control(url, "calls")["calls"]
    cpu_before = time.process_time()
    wall_before = time.monotonic()
    measuring = True
    await asyncio.sleep(window / 2)
    changed_at = time.monotonic()  # one job gets its first choice: how long until its trigger says so
    await asyncio.to_thread(control, url, "capacity", {"ml.p5.48xlarge": 1})
    await asyncio.sleep(window / 2)
    measuring = False
    cpu = time.process_time() - cpu_before
    wall = time.monotonic() - wall_before
    calls_after = control(url, "calls")["calls"]
    finished = sum(task.done() for task in tasks)
    for task in [*tasks, probe_task]:
        task.cancel()
    await asyncio.gather(*tasks, probe_task, return_exceptions=True)
    calls = {op: calls_after.get(op, 0) - calls_before.get(op, 0) for op in set(calls_after) | set(calls_before)}
    lags.sort()
    with open("/proc/self/status") as status:
        rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {
        "calls": {k: v for k, v in calls.items() if v},
        "calls_per_job_minute": sum(calls.values()) / len(known) / (wall / 60),
        "cpu_share": cpu / wall,
        "rss_mb": rss_kb / 1024,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "lag_p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))] if lags else None,
        "finished_early": finished,
        "change_to_event_s": min((t - changed_at for t in done_at if t >= changed_at), default=None),
    }


def _run_load(
    impl: str, url: str, names_file: Path, warmup: float, window: float, safety_net: float | None = None
) -> dict:
    connection = json.dumps(
        {
            "conn_type": "aws",
            "login": "bench",
            "password": "bench",
            "extra": {"endpoint_url": url, "region_name": "us-east-1"},
        }
    )
    env = {**os.environ, "AIRFLOW_CONN_BENCH": connection, "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.triggers_at_scale",
            "--load",
            impl,
            "--url",
            url,
            "--names",
            str(names_file),
            "--warmup",
            str(warmup),
            "--window",
            str(window),
            *(["--safety-net", str(safety_net)] if safety_net else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def _import_overhead(runs: int = 15) -> dict:
    """Whole-process wall time, the two commands interleaved so machine noise hits both alike."""
    commands = {"base": "import airflow.sdk", "ours": "import airflow.sdk; import airflow_sm_prefs.surface.operators"}
    walls: dict[str, list[float]] = {"base": [], "ours": []}
    for _ in range(runs):
        for key, code in commands.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            walls[key].append(time.perf_counter() - started)
    base, ours = statistics.median(walls["base"]), statistics.median(walls["ours"])
    return {"airflow_sdk_s": base, "with_operators_s": ours, "overhead_ms": 1000 * (ours - base), "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,3000")
    parser.add_argument("--window", type=float, default=120.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--impls", default="ours,provider", help="which triggers to run (comma-separated)")
    parser.add_argument("--load", choices=("ours", "provider"))
    parser.add_argument("--url")
    parser.add_argument("--names", type=Path)
    parser.add_argument("--safety-net", type=float, default=None, help="the watcher's sweep period, seconds")
    args = parser.parse_args()
    if args.load:
        known = json.loads(args.names.read_text())
        result = asyncio.run(_load(args.load, args.url, known, args.warmup, args.window, args.safety_net))
        print(json.dumps(result))
        return

    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        results = {}
        for impl in args.impls.split(","):
            with tempfile.TemporaryDirectory() as folder:
                workdir = Path(folder)
                emulator, url = _start_emulator(workdir)
                try:
                    names_file = workdir / "names.json"
                    names_file.write_text(json.dumps(_create_jobs(url, size)))
                    results[impl] = _run_load(impl, url, names_file, args.warmup, args.window, args.safety_net)
                finally:
                    emulator.terminate()
                    emulator.wait(timeout=30)
            print(f"N={size} {impl}: {json.dumps(results[impl])}", file=sys.stderr, flush=True)
        rows.append((size, results))

    lines = [
        f"Window {args.window:.0f} s after a {args.warmup:.0f} s warm-up; one event loop per run; all jobs Pending"
        + (f"; the watcher's sweep every {args.safety_net:.0f} s instead of 1800 s." if args.safety_net else "."),
        "",
        "| N | trigger | calls / job / min | CPU (share of a core) | RSS (MB) | loop lag p99 (ms) "
        "| change -> event (s) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size, results in rows:
        for impl, r in results.items():
            lag = f"{r['lag_p99_ms']:.1f}" if r["lag_p99_ms"] is not None else "n/a"
            delay = f"{r['change_to_event_s']:.1f}" if r.get("change_to_event_s") is not None else "n/a"
            lines.append(
                f"| {size} | {impl} | {r['calls_per_job_minute']:.4f} | {r['cpu_share']:.3f} | "
                f"{r['rss_mb']:.0f} | {lag} | {delay} |"
            )
        if set(results) != {"ours", "provider"}:
            continue
        ours, theirs = results["ours"], results["provider"]

        def ratio(key: str, ours: dict = ours, theirs: dict = theirs) -> str:
            return f"{ours[key] / theirs[key]:.3f}" if theirs[key] else "n/a"

        lines.append(
            f"| {size} | ours / provider | {ratio('calls_per_job_minute')} | {ratio('cpu_share')} | "
            f"{ratio('rss_mb')} | {ratio('lag_p99_ms') if ours['lag_p99_ms'] else 'n/a'} | |"
        )
    overhead = _import_overhead()
    lines += [
        "",
        f"Import overhead of `airflow_sm_prefs.surface.operators` over `airflow.sdk` (whole process, median of "
        f"{overhead['runs']}, interleaved): {overhead['overhead_ms']:.0f} ms ({overhead['airflow_sdk_s']:.2f} s -> "
        f"{overhead['with_operators_s']:.2f} s).",
    ]
    publish("\n".join(lines) + "\n", args.output)


if __name__ == "__main__":
    main()
