"""One job that writes 100,016 log lines over two instances and three milliseconds, read to its end.

An emulator (in this process, its own thread) runs one training job; its log is given the lines at once, as
a job that prints a large table at its end would. The deferred wait's reader (one ``LogFollower`` over
aiobotocore, as in a triggerer) and the blocking wait's reader (boto3, as in a worker) each read the whole
log over HTTP from an empty cursor. Reported: lines shown, ``FilterLogEvents`` calls, seconds, and the
largest cursor saved to XCom on the way (the deferred reader saves one with every batch).

Usage: python -m benchmarks.long_log [--lines 100016] [--output artifacts/long_log.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.scenarios import point_connection_at, publish

if TYPE_CHECKING:
    from airflow_sm_prefs.sagemaker.connection import Connection

STREAMS = 2
MILLISECONDS = 3


class CountingLog:
    def __init__(self) -> None:
        self.lines = 0

    def info(self, message: str, *args: object, **_: object) -> None:
        self.lines += message.startswith("[")

    warning = debug = error = exception = info


def _write_lines(server, job_name: str, lines: int) -> None:
    """The job's lines, spread evenly over its streams and three milliseconds, in the emulator's own log."""
    from sm_prefs_devkit.emulator.model import job_key

    engine = server.engine
    with engine.lock:
        engine.advance()
        job = engine.jobs[job_key("training", job_name, "us-east-1")]
        streams = job.streams[:STREAMS]
        base = job.log[-1][0] + 1
        job.log.extend(
            [base + n * MILLISECONDS // lines, streams[n % len(streams)], f"table row {n}: " + "x" * 60]
            for n in range(lines)
        )


async def _deferred(job_name: str, connection: Connection) -> dict[str, float]:
    from airflow_sm_prefs.wait.log_follower import LogCursor, LogFollower

    follower = LogFollower.shared("/aws/sagemaker/TrainingJobs", connection)
    shown = largest_cursor = 0
    started = time.monotonic()
    async with follower.follow(job_name, LogCursor(), 60.0) as queue:
        await follower.drain(job_name)
        while not queue.empty():
            batch = queue.get_nowait()
            shown += len(batch.lines)
            if batch.cursor is not None:
                largest_cursor = max(largest_cursor, len(json.dumps(batch.cursor.to_json())))
    seconds = time.monotonic() - started
    await LogFollower.close_all()
    return {"lines": shown, "calls": follower.calls, "seconds": seconds, "cursor": largest_cursor}


def _blocking(job_name: str, connection: Connection, server) -> dict[str, float]:
    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.wait.log_follower import LogCursor
    from airflow_sm_prefs.wait.worker_logs import BlockingLogReader, logs_client

    log = CountingLog()
    before = server.engine.calls.get("Logs_20140328.FilterLogEvents", 0)
    reader = BlockingLogReader(logs_client(connection), TRAINING, job_name, log=log, cursor=LogCursor())
    started = time.monotonic()
    reader.read(last=True)
    seconds = time.monotonic() - started
    calls = server.engine.calls.get("Logs_20140328.FilterLogEvents", 0) - before
    return {"lines": log.lines, "calls": calls, "seconds": seconds, "cursor": len(json.dumps(reader.cursor.to_json()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_016)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import dataclasses

    from sm_prefs_devkit.emulator import EmulatorServer, load
    from sm_prefs_devkit.emulator.model import job_key
    from tests.helpers import GPU_PAIR, boto_client, training_request

    scenario = dataclasses.replace(
        load("ample"), runtime_seconds={"default": 100_000.0}, startup_seconds=0.0, buckets={"bucket": ()}
    )
    rows = []
    with EmulatorServer(scenario) as server:
        connection = point_connection_at(server.endpoint_url)
        request = training_request("long-log", [dict(p, InstanceCount=STREAMS) for p in GPU_PAIR])
        boto_client(server.endpoint_url).create_training_job(**request)
        job = server.engine.jobs[job_key("training", "long-log", "us-east-1")]
        while not job.streams:
            time.sleep(0.1)
            with server.engine.lock:
                server.engine.advance()
        _write_lines(server, "long-log", args.lines)
        readers = (
            ("deferred (LogFollower, aiobotocore)", lambda: asyncio.run(_deferred("long-log", connection))),
            ("blocking (BlockingLogReader, boto3)", lambda: _blocking("long-log", connection, server)),
        )
        for label, read in readers:
            result = read()
            with server.engine.lock:
                written = len(job.log)  # the job goes on logging its progress while it is read
            rows.append(
                f"| {label} | {written} | {result['lines']:.0f} | {result['calls']:.0f} | {result['seconds']:.1f} "
                f"| {result['cursor']:.0f} |"
            )
    table = "\n".join(
        [
            f"A job's log of {args.lines} lines at once ({STREAMS} streams, {MILLISECONDS} milliseconds) and its "
            "progress lines, read whole over HTTP",
            "",
            "| reader | lines in the log | lines shown | FilterLogEvents calls | seconds | largest cursor (bytes) |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    publish(table, args.output)


if __name__ == "__main__":
    main()
