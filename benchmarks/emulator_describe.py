"""How many DescribeTrainingJob calls per second the emulator answers with 200 jobs in flight.

Runs the emulator as its own process (as `make demo` does) and drives it with aiobotocore from this one.
Usage: python -m benchmarks.emulator_describe [--jobs 200] [--seconds 10] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time
import urllib.request

from sm_prefs_devkit.local_stack import emulator_command
from sm_prefs_devkit.ports import free_port


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/_emulator/health", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("emulator did not start")


async def _run(url: str, jobs: int, seconds: float, concurrency: int) -> tuple[int, float]:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    from tests.helpers import CREDENTIALS, GPU_PAIR, training_request

    config = AioConfig(max_pool_connections=concurrency)
    async with get_session().create_client("sagemaker", endpoint_url=url, config=config, **CREDENTIALS) as client:
        names = [f"bench-{i}" for i in range(jobs)]
        for name in names:
            await client.create_training_job(**training_request(name, GPU_PAIR))
        calls = 0
        stop_at = time.monotonic() + seconds

        async def worker(offset: int) -> None:
            nonlocal calls
            index = offset
            while time.monotonic() < stop_at:
                await client.describe_training_job(TrainingJobName=names[index % jobs])
                calls += 1
                index += concurrency

        started = time.monotonic()
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        return calls, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(emulator_command("ample", port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(url)
        calls, elapsed = asyncio.run(_run(url, args.jobs, args.seconds, args.concurrency))
    finally:
        process.terminate()
        process.wait(timeout=10)
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "concurrency": args.concurrency,
                "describe_calls": calls,
                "seconds": round(elapsed, 2),
                "describe_per_second": round(calls / elapsed, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
