"""Entries a shared store refused, kept on the host that wrote them and sent with the next entry that reaches the
ledger: nothing lost while the store is down, nothing sent twice, nothing kept without bound."""

from __future__ import annotations

from pathlib import Path

import pendulum
import pytest

from airflow_sm_prefs.evidence import ledger, ledger_reading, ledger_writing
from airflow_sm_prefs.evidence.ledger_writing import spool_folder as default_spool_folder
from airflow_sm_prefs.storage.object_storage import StorageUnavailable
from tests.unit.test_report import entry


@pytest.fixture
def store_down(monkeypatch):
    """A shared ledger that cannot be opened (as a store whose filesystem is missing or unreachable)."""

    def unreachable():
        raise StorageUnavailable("[sm_prefs] storage = s3://team-bucket/sm-prefs: no answer")

    monkeypatch.setattr(ledger, "location", unreachable)


def _kept() -> list[str]:
    return sorted(p.name for p in ledger_writing.spool_folder().glob("*/*.json"))


def test_kept_entries_are_one_per_job_however_often_the_job_is_written(store_down):
    for _ in range(3):
        assert ledger_writing.write(entry("d", 0)) is False  # type: ignore[arg-type]
    assert ledger_writing.write(entry("e", 1)) is False  # type: ignore[arg-type]
    assert _kept() == ["d.us-east-1.json", "e.us-east-1.json"]


def test_the_spool_stops_at_its_bound_and_says_nothing_was_kept(store_down, monkeypatch, caplog):
    monkeypatch.setattr(ledger_writing, "MAX_SPOOLED", 2)
    for name in ("a", "b", "c"):
        ledger_writing.write(entry(name, 0))  # type: ignore[arg-type]
    assert _kept() == ["a.us-east-1.json", "b.us-east-1.json"]
    assert "kept on this host" not in caplog.records[-1].getMessage()


def test_the_next_entry_that_reaches_the_ledger_sends_the_kept_ones_once(store_down, tmp_path):
    ledger_writing.write(entry("d", 0))  # type: ignore[arg-type]
    (ledger_writing.spool_folder() / "nightly" / "junk.json").write_text("{not json")
    root = tmp_path / "ledger"  # the store is back, where the next write goes
    assert ledger_writing.write(entry("e", 1), root)  # type: ignore[arg-type]
    assert sorted(e["job_name"] for e in ledger_reading.read(root).entries) == ["d", "e"]
    assert _kept() == [], "sent, and what was not an entry dropped, never sent"


def test_a_local_ledger_that_fails_keeps_nothing_twice_on_the_same_disk(tmp_path):
    root = tmp_path / "ledger"
    root.write_text("a file where the folder should be")
    assert ledger_writing.write(entry("d", 0), root) is False  # type: ignore[arg-type]
    assert _kept() == []


def test_the_spool_lives_under_airflow_home(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    assert default_spool_folder() == Path(tmp_path / "home" / "sm_prefs" / "ledger-spool")


def test_the_docs_state_the_spools_bound():
    page = (Path(__file__).resolve().parents[2] / "docs" / "shared-store.md").read_text()
    assert f"at most {ledger_writing.MAX_SPOOLED:,} entries" in page


def test_a_backfill_on_the_host_sends_its_kept_entries_first_and_rebuilds_none_of_them(store_down, tmp_path):
    """The store is back and no task of this host ends soon: ``ledger backfill`` there sends what it kept (the
    task's own entry, not one rebuilt from tags) before it lists SageMaker's jobs."""
    from airflow_sm_prefs.evidence.ledger_backfill import backfill

    ledger_writing.write(entry("d", 0, pending=42.0))  # type: ignore[arg-type]
    listed = []

    class SageMaker:
        """Lists the kept job as SageMaker would: ended, and launched by this provider."""

        class conn:
            @staticmethod
            def get_paginator(method: str):
                listed.append(method)
                summary = {"TrainingJobName": "d", "TrainingJobStatus": "Completed"}
                pages = [{"TrainingJobSummaries": [summary]}] if method == "list_training_jobs" else [{}]
                return type("Paginator", (), {"paginate": lambda self, **_: pages})()

    root = tmp_path / "ledger"
    counts = backfill(SageMaker(), pendulum.now("UTC").subtract(days=1), root, "us-east-1")
    assert (counts.kept_sent, counts.listed, counts.already, counts.added) == (1, 1, 1, 0)
    (kept,) = ledger_reading.read(root).entries
    assert kept["pending_seconds"] == 42.0 and _kept() == []
    assert listed == ["list_training_jobs", "list_processing_jobs"]


def test_a_kept_entry_older_than_the_stored_one_never_replaces_it(store_down, tmp_path):
    """This host kept the job waiting for capacity while the store was down; a retry elsewhere then recorded it
    completed. Sending the kept entry later must not turn the job back to what it was a month before."""
    ledger_writing.write(entry("d", 0, outcome="no_capacity", recorded_at="2026-11-01T02:00:00+00:00"))  # type: ignore[arg-type]
    root = tmp_path / "ledger"
    newer = entry("d", 1, recorded_at="2026-12-01T02:00:00+00:00")
    ledger_writing._put(newer, root)
    assert ledger_writing.send_kept(root) == 1
    (stored,) = ledger_reading.read(root).entries
    assert (stored["outcome"], stored["selected_rank"]) == ("completed", 1) and _kept() == []


def test_a_kept_entry_newer_than_the_stored_one_replaces_it(store_down, tmp_path):
    ledger_writing.write(entry("d", 1, recorded_at="2026-12-01T02:00:00+00:00"))  # type: ignore[arg-type]
    root = tmp_path / "ledger"
    ledger_writing._put(entry("d", 0, outcome="no_capacity", recorded_at="2026-11-01T02:00:00+00:00"), root)
    assert ledger_writing.send_kept(root) == 1
    (stored,) = ledger_reading.read(root).entries
    assert (stored["outcome"], stored["selected_rank"]) == ("completed", 1)


def test_a_folder_named_like_a_kept_entry_costs_only_itself(store_down, tmp_path):
    ledger_writing.write(entry("d", 0))  # type: ignore[arg-type]
    (ledger_writing.spool_folder() / "nightly" / "a-dir.us-east-1.json").mkdir()
    root = tmp_path / "ledger"
    assert ledger_writing.send_kept(root) == 1
    assert [e["job_name"] for e in ledger_reading.read(root).entries] == ["d"] and _kept() == ["a-dir.us-east-1.json"]


def test_a_kept_task_entry_replaces_a_later_one_backfill_rebuilt(store_down, tmp_path):
    """The task's own entry holds what only the task knew: it beats an entry rebuilt from the job's tags on
    another host while this one kept it, whatever their times."""
    ledger_writing.write(entry("d", 1, pending=42.0, recorded_at="2026-12-01T02:00:00+00:00"))  # type: ignore[arg-type]
    root = tmp_path / "ledger"
    rebuilt = {**entry("d", 1, pending=0.0, recorded_at="2026-12-02T02:00:00+00:00"), "source": "backfill"}
    ledger_writing._put(rebuilt, root)
    assert ledger_writing.send_kept(root) == 1
    (stored,) = ledger_reading.read(root).entries
    assert stored["pending_seconds"] == 42.0
