"""The capacity ledger on object storage at scale: the emulator's S3 behind a proxy that adds what a real store
costs (a per-request latency, and a bandwidth limit on every answer).

The ledger's objects are put straight into the emulator's store (what thousands of tasks would have written),
laid out either as one object per job (``--layout objects``: a ledger nobody compacted) or as a ledger lies once
readers have folded it (``--layout compacted``: one object per DAG and month, the last night's jobs in their
own objects). Then, each in a fresh process: `airflow-sm-prefs report --format json` twice (the second with the
CLI's cache of the first), and the Capacity page's reading and summary (``capacity_views.Views``, what the API
server computes) first, asked again, and after one more job ended. With ``--layout objects``, last, the fold
itself (``airflow-sm-prefs ledger compact``) and a report after it on a new host. Reports the time, the requests
the store served (listings and object fetches) and the memory the page's reading holds.

Usage: python -m benchmarks.ledger_on_s3 [--jobs 2000] [--dags 50] [--layout objects|compacted]
       [--latency-ms 20] [--mbps 100] [--output FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.scenarios import publish

BUCKET, PREFIX = "team-bucket", "sm-prefs/ledger"

PAGE = r"""
import json, resource, sys, time
from airflow_sm_prefs.analysis import report
from airflow_sm_prefs.evidence import ledger, ledger_writing
from airflow_sm_prefs.surface import capacity_views


def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


root = ledger.location()
views = capacity_views.Views()
dags = {f"pipeline_{dag:03d}" for dag in range(int(sys.argv[1]))}
before = rss_mb()
out = {}
for step in ("first", "again", "after one more job"):
    if step == "after one more job":
        ledger_writing.write({**json.loads(sys.argv[2]), "job_name": "one-more-job"})
    started = time.perf_counter()
    reading = views.reading(dags)
    # As the page does: the rows kept while the folders list the same.
    rows = views.view(reading, ("report", frozenset(dags)), lambda: report.summarize(reading.entries))
    out[step] = {"seconds": time.perf_counter() - started, "jobs": sum(r["runs"] for r in rows)}
out["held_mb"] = rss_mb() - before
print(json.dumps(out))
"""


class SlowStore:
    """A loopback proxy in front of an HTTP/1.1 endpoint: each request waits ``latency`` before it is forwarded,
    and each answer is sent at ``bytes_per_second``; connections are kept alive and served concurrently, as a
    store serves many clients at once."""

    def __init__(self, upstream: str, latency: float, bytes_per_second: float) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.latency, self.bytes_per_second = latency, bytes_per_second
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with client, socket.create_connection(self.upstream) as upstream:
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader, upstream_reader = client.makefile("rb"), upstream.makefile("rb")
            while True:
                head, body = _message(reader, is_reply_to=None, client=client)
                if not head:
                    return
                time.sleep(self.latency)
                upstream.sendall(head + body)
                reply_head, reply_body = _message(upstream_reader, is_reply_to=head)
                time.sleep(len(reply_body) / self.bytes_per_second)
                client.sendall(reply_head + reply_body)


def _message(stream: object, is_reply_to: bytes | None, client: socket.socket | None = None) -> tuple[bytes, bytes]:
    """One HTTP/1.1 message from ``stream``: its head and its body (by Content-Length; a reply to HEAD has none).
    A request that waits for "100 Continue" (botocore's PUTs) is told to go on here, and the header is not passed
    on (botocore does not sign it), so the store's own interim answer never comes."""
    lines = []
    while True:
        line = stream.readline()  # type: ignore[attr-defined]
        if not line:
            return b"", b""
        if client is not None and line.lower().startswith(b"expect:"):
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            continue
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    head = b"".join(lines)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if is_reply_to is not None and is_reply_to.startswith(b"HEAD "):
        length = 0
    return head, stream.read(length) if length else b""  # type: ignore[attr-defined]


def _children_cpu() -> float:
    """CPU seconds the commands run so far used: what the client costs, apart from the emulator and the proxy
    that share this machine's cores with it."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _entry(dag: int, night: int) -> dict:
    from tests.unit.test_report import entry

    rank = 0 if night % 3 else 1
    return {
        **entry(f"job-{dag}-{night}", rank, pending=60.0 * (night % 7), run=3000.0 + night % 50),
        "dag_id": f"pipeline_{dag:03d}",
        "created_at": f"2024-{1 + night % 12:02d}-{1 + night % 28:02d}T02:00:00+00:00",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--dags", type=int, default=50)
    parser.add_argument("--layout", choices=("objects", "compacted"), default="objects")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--mbps", type=float, default=100.0, help="megabits per second per connection")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    from sm_prefs_devkit.emulator import EmulatorServer, load
    from sm_prefs_devkit.emulator.s3 import S3Location

    scenario = load("ample")
    server = EmulatorServer(dataclasses.replace(scenario, buckets={**scenario.buckets, BUCKET: ()})).start()
    store = server.emulator.s3
    assert store is not None
    months: dict[str, list[bytes]] = {}
    last_night = (args.jobs - 1) // args.dags
    for job in range(args.jobs):
        record = _entry(job % args.dags, job // args.dags)
        line = json.dumps(record, sort_keys=True).encode()
        if args.layout == "compacted" and job // args.dags < last_night:
            months.setdefault(f"{PREFIX}/{record['dag_id']}/compacted/{record['created_at'][:7]}.jsonl", []).append(
                line
            )
        else:
            store.put(S3Location(BUCKET, f"{PREFIX}/{record['dag_id']}/{record['job_name']}.json"), line)
    for key, lines in months.items():
        store.put(S3Location(BUCKET, key), b"\n".join(lines) + b"\n")
    slow = SlowStore(server.endpoint_url, args.latency_ms / 1000.0, args.mbps * 1e6 / 8)
    home = tempfile.mkdtemp(prefix="sm-prefs-bench-")
    extra = {"endpoint_url": slow.endpoint_url, "region_name": "us-east-1"}
    env = {
        **os.environ,
        "AIRFLOW_HOME": home,
        "AIRFLOW__SM_PREFS__STORAGE": f"s3://{BUCKET}/sm-prefs",
        "AIRFLOW__SM_PREFS__STORAGE_CONN_ID": "bench_store",
        "AIRFLOW_CONN_BENCH_STORE": json.dumps(
            {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
        ),
    }
    rows = []

    def served() -> tuple[int, int]:
        calls = server.engine.calls
        return calls["s3.LIST"], calls["s3.GET"]

    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    for label in ("`report`, first run on this host", "`report` again (the CLI's cache, one listing)"):
        before = served()
        started, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
        assert done.returncode == 0, done.stderr[-2000:]
        runs = sum(row["runs"] for row in json.loads(done.stdout))
        assert runs == args.jobs, (runs, args.jobs)
        after = served()
        rows.append(
            f"| {label} | {runs:,} | {seconds:.1f} s ({cpu:.1f} s) | {after[0] - before[0]} | "
            f"{after[1] - before[1]:,} | |"
        )
    before = served()
    one_more = json.dumps(_entry(0, args.jobs))
    done = subprocess.run(
        [sys.executable, "-c", PAGE, str(args.dags), one_more], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = json.loads(done.stdout.strip().splitlines()[-1])
    for step, label in (
        ("first", "Capacity page's reading + summary, first"),
        ("again", "the page again, nothing changed"),
        ("after one more job", "the page after one more job ended"),
    ):
        memory = f"{page['held_mb']:.0f} MB" if step == "after one more job" else ""
        rows.append(f"| {label} | {page[step]['jobs']:,} | {page[step]['seconds']:.1f} s | | | {memory} |")
    after = served()
    rows.append(
        f"| (requests of the page's three readings) | | | {after[0] - before[0]} | {after[1] - before[1]:,} | |"
    )
    if args.layout == "objects":  # the fold a reader past the threshold does once, then a new host's report
        compact = [command[0], "ledger", "compact", "--older-than", "1d"]
        for label, argv in (
            ("`ledger compact` (the one-time fold)", compact),
            ("`report` on a new host after it", command),
        ):
            before = served()
            started, cpu = time.perf_counter(), _children_cpu()
            fresh_home = {**env, "AIRFLOW_HOME": tempfile.mkdtemp(prefix="sm-prefs-bench-")}
            done = subprocess.run(argv, capture_output=True, text=True, env=fresh_home, check=False)
            seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
            assert done.returncode == 0, done.stderr[-2000:]
            after = served()
            jobs = sum(row["runs"] for row in json.loads(done.stdout)) if argv is command else args.jobs + 1
            rows.append(
                f"| {label} | {jobs:,} | {seconds:.1f} s ({cpu:.1f} s) | {after[0] - before[0]} | "
                f"{after[1] - before[1]:,} | |"
            )
    server.stop()
    table = "\n".join(
        [
            f"Capacity ledger on the emulator's S3 behind a proxy adding {args.latency_ms:g} ms per request and "
            f"{args.mbps:g} Mbit/s per connection: {args.jobs:,} jobs in {args.dags} DAGs, "
            + ("one object each" if args.layout == "objects" else "by month, the last night's jobs one object each"),
            "",
            "| what | jobs | took (the command's own CPU) | listings | objects fetched | memory the reading holds |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
        ]
    )
    publish(table, args.output)


if __name__ == "__main__":
    main()
