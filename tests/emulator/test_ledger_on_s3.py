"""The capacity ledger on object storage: ``[sm_prefs] ledger_path = s3://...`` with its connection, written and
read over the S3 API (the emulator's, moto's backend) by the unmodified s3fs the `s3` extra installs."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import ledger
from tests.helpers import boto_client
from tests.unit.test_report import entry

pytestmark = pytest.mark.emulator


@pytest.fixture
def s3_ledger(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("ample", buckets={"team-bucket": ()})
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", "s3://team-bucket/sm-prefs/ledger")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_CONN_ID", aws_connection(server, "ledger_store"))
    return boto_client(server.endpoint_url, service="s3")


def _keys(s3) -> list[str]:
    return sorted(item["Key"] for item in s3.list_objects_v2(Bucket="team-bucket").get("Contents", []))


def test_jobs_recorded_on_one_host_are_reported_from_the_bucket(s3_ledger):
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300), ("c", 1, 200)):
        assert ledger.write(entry(name, rank, pending=pending))
    assert _keys(s3_ledger) == [f"sm-prefs/ledger/nightly/{name}.json" for name in "abc"]
    # The installed command in a process of its own, as a user pipes it to jq: nothing but JSON on stdout.
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["dag_id"], row["task_id"], row["runs"]) == ("nightly", "fine_tune", 3)


def test_compaction_folds_the_bucket_into_month_objects_and_loses_nothing(s3_ledger):
    october, today = "2026-10-03T02:00:00+00:00", "2026-12-02T02:00:00+00:00"
    for name in ("a", "b"):
        ledger.write(entry(name, 1, created=october, recorded_at=october))
    ledger.write(entry("recent", 0, created=today, recorded_at=today))
    before = sorted(e["job_name"] for e in ledger.read().entries)
    folded = ledger.compact(now=dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC))
    assert (folded.folded, folded.files) == (2, 1)
    assert _keys(s3_ledger) == [
        "sm-prefs/ledger/nightly/compacted/2026-10.jsonl",
        "sm-prefs/ledger/nightly/recent.json",
    ]
    assert sorted(e["job_name"] for e in ledger.read().entries) == before


def test_stray_and_misplaced_objects_cost_themselves_on_the_bucket(s3_ledger):
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300)):
        assert ledger.write(entry(name, rank, pending=pending))
    prefix = "sm-prefs/ledger"
    s3_ledger.put_object(Bucket="team-bucket", Key=f"{prefix}/nightly/compacted", Body=b"stray")
    other = json.dumps(entry("c", 1)).encode()  # says dag_id "nightly"
    s3_ledger.put_object(Bucket="team-bucket", Key=f"{prefix}/other/c.json", Body=other)
    reading = ledger.read()
    assert sorted(e["job_name"] for e in reading.entries) == ["a", "b"]
    assert reading.bad == 2, reading.bad_examples
    assert "c.json: its dag_id 'nightly' is not this folder's DAG (other)" in reading.bad_examples
