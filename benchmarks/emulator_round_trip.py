"""What one call to the emulator costs, and what one GET costs the client that reads the ledger.

1. Round trips, the emulator in this process and boto3 calling it one at a time: ListTrainingJobs, GetObject and
   HeadObject, with the server's ``TCP_NODELAY`` as shipped and with Nagle's algorithm back on (``--nagle``
   shows what every call paid before).
2. The client's CPU per GET over 2,000 ledger objects, the emulator in another process: s3fs's ``cat``, the
   same aiobotocore client asked directly (``object_listing.fetch_many``), and boto3's synchronous client.

Usage: python -m benchmarks.emulator_round_trip [--calls 200] [--objects 2000] [--output FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scenarios import publish

SERVE = r"""
import dataclasses, json, sys, time
from sm_prefs_devkit.emulator import EmulatorServer, load
from sm_prefs_devkit.emulator.s3 import S3Location
scenario = load("ample")
server = EmulatorServer(dataclasses.replace(scenario, buckets={**scenario.buckets, "team-bucket": ()})).start()
for index in range(int(sys.argv[1])):
    body = json.dumps({"job_name": f"job-{index}", "padding": "x" * 600}).encode()
    server.emulator.s3.put(S3Location("team-bucket", f"sm-prefs/ledger/dag-{index % 50}/job-{index}.json"), body)
print(server.endpoint_url, flush=True)
time.sleep(3600)
"""


def _round_trips(calls: int, nagle: bool) -> dict[str, float]:
    import boto3

    from sm_prefs_devkit.emulator import EmulatorServer, load
    from sm_prefs_devkit.emulator.protocol import RequestHandler

    RequestHandler.disable_nagle_algorithm = not nagle
    scenario = load("ample")
    server = EmulatorServer(dataclasses.replace(scenario, buckets={**scenario.buckets, "probe": ()})).start()
    try:
        keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
        sagemaker = boto3.client("sagemaker", endpoint_url=server.endpoint_url, **keys)
        s3 = boto3.client("s3", endpoint_url=server.endpoint_url, **keys)
        s3.put_object(Bucket="probe", Key="object.json", Body=b"{}" * 300)
        probes = {
            "ListTrainingJobs": sagemaker.list_training_jobs,
            "GetObject": lambda: s3.get_object(Bucket="probe", Key="object.json")["Body"].read(),
            "HeadObject": lambda: s3.head_object(Bucket="probe", Key="object.json"),
        }
        took = {}
        for name, call in probes.items():
            call()  # the connection opened
            started = time.perf_counter()
            for _ in range(calls):
                call()
            took[name] = (time.perf_counter() - started) / calls * 1000
        return took
    finally:
        RequestHandler.disable_nagle_algorithm = True
        server.stop()


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _client_cpu(objects: int) -> dict[str, float]:
    serving = subprocess.Popen([sys.executable, "-c", SERVE, str(objects)], stdout=subprocess.PIPE, text=True)
    try:
        assert serving.stdout is not None
        endpoint = serving.stdout.readline().strip()
        extra = {"endpoint_url": endpoint, "region_name": "us-east-1"}
        os.environ.update(
            {
                "AIRFLOW_HOME": tempfile.mkdtemp(prefix="sm-prefs-bench-"),
                "AIRFLOW__SM_PREFS__STORAGE": "s3://team-bucket/sm-prefs",
                "AIRFLOW__SM_PREFS__STORAGE_CONN_ID": "bench_store",
                "AIRFLOW_CONN_BENCH_STORE": json.dumps(
                    {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
                ),
            }
        )
        import boto3

        from airflow_sm_prefs.evidence import ledger
        from airflow_sm_prefs.storage import object_listing

        root = ledger.location()
        keys = [item.key for item in object_listing.listing(root)]
        prefix = str(root.path).rstrip("/")
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        ways = {
            "s3fs `cat`, 64 at a time": lambda: root.fs.cat([f"{prefix}/{key}" for key in keys], batch_size=64),
            "aiobotocore asked directly, 64 at a time (`object_listing`)": lambda: object_listing.fetch_many(
                root, keys
            ),
            "boto3, one after another": lambda: [
                s3.get_object(Bucket="team-bucket", Key=f"sm-prefs/ledger/{key}")["Body"].read() for key in keys
            ],
        }
        per_get = {}
        for name, fetch in ways.items():
            used = _cpu()
            assert len(fetch()) == objects
            per_get[name] = (_cpu() - used) / objects * 1000
        return per_get
    finally:
        serving.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    shipped, nagle = _round_trips(args.calls, nagle=False), _round_trips(args.calls, nagle=True)
    rows = [f"| {name} | {nagle[name]:.1f} ms | {shipped[name]:.1f} ms |" for name in shipped]
    cpu = _client_cpu(args.objects)
    table = "\n".join(
        [
            f"One call to the emulator, boto3, {args.calls} calls each, one at a time",
            "",
            "| call | Nagle's algorithm on (before) | TCP_NODELAY (shipped) |",
            "|---|---:|---:|",
            *rows,
            "",
            f"The client's CPU per GET, {args.objects:,} ledger objects, the emulator in another process",
            "",
            "| how | CPU per GET |",
            "|---|---:|",
            *(f"| {name} | {ms:.2f} ms |" for name, ms in cpu.items()),
        ]
    )
    publish(table, args.output)


if __name__ == "__main__":
    main()
