"""Every reader and writer of the shared store, against a store that misbehaves (tests/faulty_store.py in front of
the emulator's S3): a one-line error naming the store and what to check, or a degraded answer, within the
deadline; never a traceback, never a task failed by the evidence.
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from airflow_sm_prefs.evidence import ledger_reading, ledger_writing
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.surface import cli
from tests.faulty_store import FaultyStore
from tests.helpers import boto_client
from tests.unit.test_report import entry

pytestmark = pytest.mark.emulator

# [sm_prefs] storage_timeout while the store misbehaves: two attempts of 2 s per request. A store that answers
# keeps the default (30 s), so a busy machine's slow answer is never taken for a fault.
DEADLINE = 4.0
FAULTS = ["refused", "blackhole", "reset", 403, 500, 503, "truncate"]
# What the line says of each fault. A cut answer whose length is not in doubt may also time out; a reset that
# lands while aiohttp is still connecting is reported by it as a failed connect, so either phrasing is true.
SAID = {
    "refused": ("could not be reached",),
    "blackhole": ("did not answer in time",),
    "reset": ("closed the connection without answering", "could not be reached"),
    403: ("refused access",),
    500: ("answered with a server error (500)",),
    503: ("answered with a server error (503)",),
    "truncate": ("cut its answer short", "did not answer in time"),
}
STORE = "the shared store ([sm_prefs] storage = s3://team-bucket/sm-prefs)"
# Faults a ledger entry's upload meets. A cut answer is not one: S3 answers an upload with no body, so there is
# nothing to cut and the store has the entry (it once seemed refused only because the upload waited, unbounded,
# for a "100 Continue" the proxy never sent).
WRITE_FAULTS = [fault for fault in FAULTS if fault != "truncate"]


@pytest.fixture
def store(start_emulator, monkeypatch, tmp_path):
    """The emulator's S3 behind the faulty proxy, as ``[sm_prefs] storage`` with three jobs and a price table."""
    server = start_emulator("nightly-weather", buckets={"team-bucket": ()})
    proxy = FaultyStore(server.endpoint_url.rstrip("/"))
    extra = {"endpoint_url": proxy.endpoint_url, "region_name": "us-east-1"}
    connection = {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_TEAM_STORE", json.dumps(connection))
    direct = {**connection, "extra": {**extra, "endpoint_url": server.endpoint_url}}  # the Price List API, well
    monkeypatch.setenv("AIRFLOW_CONN_PRICING", json.dumps(direct))
    for option in ("LEDGER_PATH", "LEDGER_CONN_ID", "PRICE_TABLE"):
        monkeypatch.delenv(f"AIRFLOW__SM_PREFS__{option}", raising=False)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://team-bucket/sm-prefs")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", "team_store")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300), ("c", 1, 200)):
        assert ledger_writing.write(entry(name, rank, pending=pending))
    table = {"format": 1, "currency": "USD", "unit": "instance-hour", "source": "team", "retrieved": "2026-12-01",
             "prices": {"us-east-1": {"training": {"ml.p5.48xlarge": "98.32"}}}}  # fmt: skip
    s3 = boto_client(server.endpoint_url, service="s3")
    s3.put_object(Bucket="team-bucket", Key="sm-prefs/prices.json", Body=json.dumps(table).encode())
    yield proxy, server
    proxy.stop()


def _apply(fault, proxy: FaultyStore, monkeypatch) -> None:
    """The store fails with ``fault``, and the package waits for it ``DEADLINE`` at most."""
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", str(DEADLINE))
    if fault == "refused":  # nothing listens where the connection points
        proxy.stop()
    else:
        proxy.fault = fault


def _heal(proxy: FaultyStore, monkeypatch) -> None:
    proxy.fault = None
    monkeypatch.delenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT")


def _one_line(capsys, argv: list[str]) -> tuple[int, str, float]:
    capsys.readouterr()
    started = time.monotonic()
    code = cli.main(argv)
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    return code, err, elapsed


def test_the_store_answers_when_nothing_is_wrong(store, capsys):
    code, err, _ = _one_line(capsys, ["report", "--format", "json"])
    assert code == 0, err
    assert prices.current().hourly("us-east-1", "training", "ml.p5.48xlarge").usd == 98.32


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(
    "argv",
    [
        ["report"],
        ["weather"],
        ["advise", "--dag-id", "nightly", "--task-id", "fine_tune"],
        ["prices", "show"],
        ["ledger", "compact", "--older-than", "1m"],
        ["prices", "refresh", "--aws-conn-id", "pricing"],
    ],
    ids=["report", "weather", "advise", "prices-show", "ledger-compact", "prices-refresh"],
)
def test_a_command_says_in_one_line_what_failed_and_what_to_check(store, fault, argv, capsys, monkeypatch):
    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    code, err, elapsed = _one_line(capsys, argv)
    # Ours, not the amazon provider's log lines (a hook says where it found its credentials, at INFO).
    lines = [line for line in err.splitlines() if line.startswith("airflow-sm-prefs: error:")]
    assert code == 1, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"airflow-sm-prefs: error: {STORE} "), lines[0]
    assert any(lines[0].startswith(f"airflow-sm-prefs: error: {STORE} {said}; ") for said in SAID[fault]), lines[0]
    # A hang guard, far above the deadline: a store that never answers must not hold a command for good.
    assert elapsed < 20 * DEADLINE, f"{argv} took {elapsed:.0f} s"


@pytest.mark.parametrize("fault", WRITE_FAULTS)
def test_the_tasks_evidence_side_costs_the_evidence_never_the_task(store, fault, caplog, monkeypatch):
    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    with caplog.at_level(logging.WARNING):
        table = prices.current()  # the cost estimate's table
        written = ledger_writing.write(entry("d", 0, pending=60))  # the job's entry
    assert table.sources == prices.shipped().sources, "the shipped table, without the team's"
    assert written is False
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert any(w.startswith("Price table left out:") for w in warnings), warnings
    assert any("Could not record SageMaker job" in w for w in warnings), warnings


@pytest.mark.parametrize(
    "argv", [["report"], ["ledger", "compact"], ["prices", "show"]], ids=["report", "ledger-compact", "prices-show"]
)
def test_a_missing_bucket_is_said_and_never_created(store, argv, capsys, monkeypatch):
    _, server = store
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://no-such-bucket/sm-prefs")
    code, err, _ = _one_line(capsys, argv)
    assert code in (1, 2) and "Traceback" not in err, err
    assert "no-such-bucket" in err and ("does not exist" in err or "no such bucket" in err), err
    # The setting the user set, never one they did not (no "none yet", as if the store were empty).
    assert "[sm_prefs] storage" in err and "ledger_path" not in err and "none yet" not in err, err
    assert ledger_writing.write(entry("e", 0, pending=60)) is False
    buckets = {b["Name"] for b in boto_client(server.endpoint_url, service="s3").list_buckets()["Buckets"]}
    assert "no-such-bucket" not in buckets, "this package never creates a bucket"


@pytest.mark.parametrize("fault", FAULTS)
def test_a_registry_the_store_cannot_read_is_not_an_empty_one(store, fault, monkeypatch):
    from airflow_sm_prefs.preflight import certification

    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    with pytest.raises(certification.RegistryUnreachable) as raised:
        certification.read(certification.registry_path(None))
    where = "the store holding the certification registry s3://team-bucket/sm-prefs/certified.yaml"
    assert any(str(raised.value).startswith(f"{where} {said}; ") for said in SAID[fault]), str(raised.value)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_registry_write_the_store_refuses_says_why_within_the_deadline(store, fault, monkeypatch):
    from airflow_sm_prefs.preflight import certification
    from tests.unit.test_certification import certified

    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    started = time.monotonic()
    with pytest.raises(certification.RegistryUnreachable) as raised:
        certification.record(certification.registry_path(None), "eval", [certified("ml.p5.48xlarge")])
    where = "the store holding the certification registry s3://team-bucket/sm-prefs/certified.yaml"
    assert any(str(raised.value).startswith(f"{where} {said}; ") for said in SAID[fault]), str(raised.value)
    assert time.monotonic() - started < 20 * DEADLINE


def test_an_entry_whose_answer_is_cut_is_in_the_store_and_the_price_table_is_left_out(store, caplog, monkeypatch):
    proxy, _ = store
    _apply("truncate", proxy, monkeypatch)
    with caplog.at_level(logging.WARNING):
        table = prices.current()
        assert ledger_writing.write(entry("d", 0, pending=60)) is True
    assert table.sources == prices.shipped().sources, "a price table read in half is not used"
    assert not ledger_writing.spool_folder().exists(), "nothing kept on the host: the store took it"
    _heal(proxy, monkeypatch)
    assert sorted(e["job_name"] for e in ledger_reading.read().entries) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("fault", [f for f in WRITE_FAULTS if f != "refused"])
def test_an_entry_the_store_refused_is_kept_on_the_host_and_sent_with_the_next(store, fault, caplog, monkeypatch):
    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    with caplog.at_level(logging.WARNING):
        assert ledger_writing.write(entry("d", 0, pending=60)) is False
    kept = ledger_writing.spool_folder() / "nightly" / "d.us-east-1.json"
    assert kept.is_file()
    assert any("kept on this host in" in record.getMessage() for record in caplog.records)
    _heal(proxy, monkeypatch)  # the store is back
    assert ledger_writing.write(entry("e", 1, pending=90)) is True
    names = sorted(e["job_name"] for e in ledger_reading.read().entries)
    assert names == ["a", "b", "c", "d", "e"], "the kept entry reached the ledger with the next one"
    assert not kept.exists(), "sent once, then no longer kept"


@pytest.mark.parametrize("fault", ["blackhole", 503])
def test_the_capacity_page_keeps_its_last_page_and_says_since_when_the_store_fails(store, fault, monkeypatch):
    from airflow_sm_prefs.surface import capacity_page, capacity_views
    from tests.unit.test_hostile_ledger import _page

    monkeypatch.setattr(capacity_page, "_VIEWS", capacity_views.Views())  # this test's pages only
    client = _page(monkeypatch)
    first = client.get("/capacity")
    assert first.status_code == 200 and "fine_tune" in first.text and "Since " not in first.text
    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    started = time.monotonic()
    failing = client.get("/capacity")
    assert time.monotonic() - started < 20 * DEADLINE
    assert failing.status_code == 200
    assert (
        "the shared store holding the capacity ledger " in failing.text
        and "Shown: the page as computed at" in failing.text
    )
    assert "fine_tune" in failing.text, "the last page, still shown"
    report = client.get("/capacity/report")
    assert report.status_code == 503
    assert report.json()["detail"].startswith("the shared store holding the capacity ledger ")
