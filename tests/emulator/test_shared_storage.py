"""Two Airflow homes that share nothing but ``[sm_prefs] storage`` on the emulator's S3: what one host records,
certifies and refreshes, the other reports, checks and prices with, in processes of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import ledger_writing
from airflow_sm_prefs.preflight import certification
from airflow_sm_prefs.reference import prices
from tests.helpers import boto_client
from tests.unit.test_certification import certified
from tests.unit.test_report import entry

pytestmark = pytest.mark.emulator

COMMAND = str(Path(sys.executable).with_name("airflow-sm-prefs"))


@pytest.fixture
def shared(start_emulator, aws_connection, monkeypatch, tmp_path):
    server = start_emulator("nightly-weather", buckets={"team-bucket": ()})
    conn_id = aws_connection(server, "shared_store")
    for option in ("LEDGER_PATH", "PRICE_TABLE"):  # the test session's scratch files: each home has none
        monkeypatch.delenv(f"AIRFLOW__SM_PREFS__{option}", raising=False)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://team-bucket/sm-prefs")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", conn_id)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home-a"))
    return server, tmp_path


def _on_host(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return _run(home, COMMAND, *argv)


def _run(home: Path, *command: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "AIRFLOW_HOME": str(home)}
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_what_one_home_records_and_refreshes_another_reports_and_prices_with(shared):
    server, tmp_path = shared
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300), ("c", 1, 200)):
        assert ledger_writing.write(entry(name, rank, pending=pending))  # what a task on host A does when its job ends
    certification.record(certification.registry_path(None), "eval", [certified("ml.p5.48xlarge")])  # A certifies
    _on_host(home_a, "prices", "refresh", "--aws-conn-id", "shared_store")

    (row,) = json.loads(_on_host(home_b, "report", "--format", "json").stdout)
    assert (row["dag_id"], row["task_id"], row["runs"]) == ("nightly", "fine_tune", 3)
    shown = _on_host(home_b, "prices", "show", "--region", "us-east-1").stdout
    assert "AWS Price List Query API" in shown and server.endpoint_url in shown
    assert "ml.p5.48xlarge         $100/h" in shown
    strict_on_b = (
        "from airflow_sm_prefs.preflight.certification import Certification\n"
        "judged = Certification.judged('eval', 'strict', None)\n"
        "print(judged.uncertified([('ml.p5.48xlarge', 1, 'first'), ('ml.g5.48xlarge', 1, 'second')]))"
    )
    refused = _run(home_b, sys.executable, "-c", strict_on_b).stdout
    assert "second: not certified for workload 'eval' in s3://team-bucket/sm-prefs/certified.yaml" in refused
    assert "first" not in refused
    listed = boto_client(server.endpoint_url, service="s3").list_objects_v2(Bucket="team-bucket")["Contents"]
    ledger_keys = {f"sm-prefs/ledger/nightly/{name}.us-east-1.json" for name in "abc"}
    assert {item["Key"] for item in listed} == {"sm-prefs/prices.json", "sm-prefs/certified.yaml", *ledger_keys}
    # Nothing kept on a host but the CLI's cache of what it fetched, which the store's listing overrules.
    kept = [
        p.relative_to(home) for home in (home_a, home_b) for p in home.joinpath("sm_prefs").rglob("*") if p.is_file()
    ]
    assert kept and {path.parts[:2] for path in kept} == {("sm_prefs", "cache")}, kept


def test_a_long_lived_process_sees_another_hosts_new_price_table(shared):
    server, _ = shared
    s3 = boto_client(server.endpoint_url, service="s3")

    def publish(usd: str) -> None:  # another host's `prices refresh`, straight through the S3 API
        document = prices.to_json({"us-east-1": {"training": {"ml.p5.48xlarge": usd}}}, "negotiated", "2026-12-01")
        s3.put_object(Bucket="team-bucket", Key="sm-prefs/prices.json", Body=json.dumps(document).encode())

    publish("90")
    assert prices.current().hourly("us-east-1", "training", "ml.p5.48xlarge").usd == 90.0
    publish("80")
    assert prices.current().hourly("us-east-1", "training", "ml.p5.48xlarge").usd == 80.0
