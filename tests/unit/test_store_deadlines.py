"""A task never pays for the evidence: a shared store that refuses or never answers costs the cost estimate's
layer of the team's prices and the ledger entry, within ``[sm_prefs] storage_timeout``, never the task.

The stores are real sockets on loopback, spoken to by the unmodified s3fs / aiobotocore clients through an
Airflow connection: a closed port (connection refused) and a listening socket that accepts and never answers.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from airflow_sm_prefs.evidence import ledger_writing
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.storage import bounded, object_storage
from tests.helpers import store_work_under_way

DEADLINE = 2.0


@pytest.fixture
def silent_store() -> Iterator[str]:
    """An endpoint that accepts connections and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


@pytest.fixture
def refusing_store() -> str:
    """An endpoint where nothing listens: every connection is refused."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def store_at(monkeypatch, tmp_path):
    """``[sm_prefs] storage`` on S3 through a connection to ``endpoint``, with a short deadline."""

    def configure(endpoint: str) -> None:
        for option in ("LEDGER_PATH", "LEDGER_CONN_ID", "PRICE_TABLE"):
            monkeypatch.delenv(f"AIRFLOW__SM_PREFS__{option}", raising=False)
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
        extra = {"endpoint_url": endpoint, "region_name": "us-east-1"}
        connection = {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
        monkeypatch.setenv("AIRFLOW_CONN_SM_PREFS_STORE", json.dumps(connection))
        monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://team-evidence/sm-prefs")
        monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", "sm_prefs_store")
        monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", str(DEADLINE))

    return configure


def _entry() -> dict:
    return {"format": 1, "dag_id": "nightly", "task_id": "train", "job_name": "nightly-train-1", "outcome": "completed"}


@pytest.mark.parametrize("store", ["silent_store", "refusing_store"])
def test_the_cost_estimate_falls_back_to_the_shipped_prices_within_the_deadline(store, store_at, request, caplog):
    store_at(request.getfixturevalue(store))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=prices.__name__):
        table = prices.current()
    assert time.monotonic() - started < DEADLINE + 10, "bounded by the deadline, not by the store"
    assert table == prices.shipped()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == prices.__name__]
    assert warning.startswith("Price table left out:")
    if store == "silent_store":
        assert "team-evidence/sm-prefs/prices.json" in warning and "storage_timeout" in warning


@pytest.mark.parametrize("store", ["silent_store", "refusing_store"])
def test_a_ledger_entry_the_store_will_not_take_costs_the_entry_not_the_task(store, store_at, request, caplog):
    store_at(request.getfixturevalue(store))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=ledger_writing.__name__):
        assert ledger_writing.write(_entry()) is False
    assert time.monotonic() - started < DEADLINE + 10
    (warning,) = [r.getMessage() for r in caplog.records if r.name == ledger_writing.__name__]
    assert "nightly-train-1" in warning


def test_a_write_the_store_never_answers_lets_go_of_its_thread_while_the_store_still_holds_it(silent_store, store_at):
    """An upload waited for "100 Continue" with no bound (aiohttp starts its read timeout once the body is sent):
    a store silent after the headers held the write's thread for good. Now the request's own timeouts end it,
    while the silent store still holds every connection open."""
    store_at(silent_store)
    assert ledger_writing.write(_entry()) is False
    deadline = time.monotonic() + 60  # the bound of a hang, far above two attempts of DEADLINE / 2 each
    while (left := store_work_under_way()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"still waiting on the silent store: {[thread.name for thread in left]}"


def test_within_returns_the_answer_or_raises_what_the_operation_raised():
    assert bounded.within("probe", lambda: 42, seconds=5) == 42
    with pytest.raises(KeyError, match="gone"):
        bounded.within("probe", lambda: {}["gone"], seconds=5)


def test_within_gives_up_at_its_deadline_naming_what_and_the_setting():
    released = threading.Event()
    started = time.monotonic()
    with pytest.raises(bounded.StoreTimedOut, match=r"the ledger's folder: no answer from the store within 0.3 s"):
        bounded.within("the ledger's folder", released.wait, seconds=0.3)
    assert time.monotonic() - started < 5
    released.set()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_deadline_that_is_not_a_positive_number_of_seconds_is_refused_naming_the_setting(value, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", value)
    with pytest.raises(object_storage.StorageSettingError, match=r"\[sm_prefs\] storage_timeout"):
        object_storage.deadline_seconds()


def test_the_default_deadline_is_tens_of_seconds(monkeypatch):
    monkeypatch.delenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", raising=False)
    assert object_storage.deadline_seconds() == 30.0
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", "7.5")
    assert object_storage.deadline_seconds() == 7.5
