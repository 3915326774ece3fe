"""When a reader folds the ledger by itself, and what it refuses to be told."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest

from airflow_sm_prefs.evidence import compaction_lease, ledger, ledger_compaction, ledger_reading, ledger_writing
from airflow_sm_prefs.storage import object_storage
from tests.unit.test_report import entry


@pytest.fixture
def folds(monkeypatch):
    folded = []
    monkeypatch.setattr(
        ledger_compaction, "compact", lambda root: folded.append(root) or ledger_compaction.Compaction()
    )
    return folded


def _reading(old: int | None) -> ledger_reading.Reading:
    return ledger_reading.Reading([], 0, [], None, old)


def test_a_reading_past_the_threshold_folds_and_one_below_or_local_does_not(folds, monkeypatch):
    monkeypatch.delenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", raising=False)
    threshold = ledger_compaction.DEFAULT_COMPACT_AFTER
    assert threshold == 1_000
    assert ledger_compaction.compact_if_due("root", _reading(threshold - 1)) is None
    assert ledger_compaction.compact_if_due("root", _reading(None)) is None, (
        "a local folder is never folded by a reader"
    )
    assert ledger_compaction.compact_if_due("root", _reading(threshold)) is not None
    assert folds == ["root"]


def test_the_threshold_is_a_setting_and_zero_leaves_folding_to_the_command(folds, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "3")
    assert ledger_compaction.compact_if_due("root", _reading(3)) is not None
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "0")
    assert ledger_compaction.compact_if_due("root", _reading(10**6)) is None
    assert folds == ["root"]


@pytest.mark.parametrize("value", ["-1", "many", "1e3", "2.5"])
def test_a_threshold_that_is_not_a_whole_number_is_refused_naming_the_setting(folds, monkeypatch, value):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", value)
    with pytest.raises(object_storage.StorageSettingError, match=r"^\[sm_prefs\] ledger_compact_after = "):
        ledger_compaction.compact_if_due("root", _reading(10**6))
    assert folds == []


@pytest.mark.parametrize(
    ("below_a_dags_folder", "is_entry"),
    [
        ("job-1.json", True),
        (".job-1.json.123.tmp", False),
        ("compacted/2026-10.jsonl", True),
        ("compacted/.2026-10.jsonl", False),
        ("compacted/2026-10.json", False),
        ("compacted", False),
        ("notes.txt", False),
        ("deeper/job.json", False),
        ("compacted/deeper/2026-10.jsonl", False),
    ],
)
def test_what_a_listing_reader_takes_for_an_entry(below_a_dags_folder, is_entry):
    assert ledger.is_ledger_file(below_a_dags_folder) is is_entry


OCTOBER = "2026-10-03T02:00:00+00:00"
AFTER_OCTOBER = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def _old(name: str, rank: int = 1, **extra):
    return entry(name, rank, created=OCTOBER, recorded_at=OCTOBER, **extra)


def test_a_local_fold_keeps_an_entry_written_again_while_it_folds(tmp_path, monkeypatch):
    root = tmp_path / "ledger"
    for name in ("a", "b", "c"):
        ledger_writing.write(_old(name), root)
    merge = ledger.replace_file

    def a_retry_lands_meanwhile(target, data):
        merge(target, data)
        if "compacted" in str(target):  # between the month's write and the jobs' removal
            ledger_writing.write(_old("b", 0, pending=5), root)

    monkeypatch.setattr(ledger, "replace_file", a_retry_lands_meanwhile)
    result = ledger_compaction.compact(root, now=AFTER_OCTOBER)
    assert (result.folded, result.kept, result.files) == (2, 1, 1)
    monkeypatch.setattr(ledger, "replace_file", merge)
    assert sorted(p.name for p in (root / "nightly").iterdir()) == ["b.us-east-1.json", "compacted"]
    b = next(e for e in ledger_reading.read(root).entries if e["job_name"] == "b")
    assert (b["selected_rank"], b["pending_seconds"]) == (0, 5), "the newer entry, not the folded one"
    assert not list(root.rglob("*.folding")), "nothing left aside"


def test_a_fold_keeps_one_line_per_job_and_region_and_an_objects_older_name_gives_way(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(_old("a", pending=1), root)
    ledger_writing.write({**_old("a", pending=2), "region": "eu-west-1"}, root)
    (root / "nightly" / "b.json").write_text(json.dumps(_old("b", pending=3)))  # named before the Region was
    ledger_writing.write(_old("b", pending=4), root)
    assert ledger_compaction.compact(root, now=AFTER_OCTOBER).folded == 4
    assert sorted(p.name for p in (root / "nightly").iterdir()) == ["compacted"]
    folded = {(e["job_name"], e["region"]): e["pending_seconds"] for e in ledger_reading.read(root).entries}
    assert folded == {("a", "us-east-1"): 1, ("a", "eu-west-1"): 2, ("b", "us-east-1"): 4}
    ledger_writing.write({**_old("a", pending=5), "region": "eu-west-1"}, root)
    ledger_compaction.compact(root, now=AFTER_OCTOBER)
    again = {(e["job_name"], e["region"]): e["pending_seconds"] for e in ledger_reading.read(root).entries}
    assert again == {**folded, ("a", "eu-west-1"): 5}


def test_a_local_fold_waits_for_no_one_while_another_holds_the_lease(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(_old("a"), root)
    lease = root / compaction_lease.LEASE
    lease.write_text(json.dumps({"holder": "worker-2:7", "until": "2999-01-01T00:00:00+00:00"}))
    result = ledger_compaction.compact(root, now=AFTER_OCTOBER)
    assert (result.folded, result.busy) == (0, "worker-2:7 until 2999-01-01T00:00:00+00:00")
    lease.write_text("not a lease")  # what this version did not write is taken over
    assert ledger_compaction.compact(root, now=AFTER_OCTOBER).folded == 1
    assert not lease.exists(), "given back"


def test_four_threads_rewriting_one_entry_leave_one_whole_entry(tmp_path):
    root = tmp_path / "ledger"
    failures = []

    def rewrite(thread: int) -> None:
        for attempt in range(50):
            if not ledger_writing.write(entry("same-job", 1, pending=float(thread * 100 + attempt)), root):
                failures.append(thread)

    threads = [threading.Thread(target=rewrite, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == [], "every write reached the ledger"
    (only,) = ledger_reading.read(root).entries
    assert only["pending_seconds"] % 100 == 49, "the last write of one of the threads"
    assert [p.name for p in (root / "nightly").iterdir()] == ["same-job.us-east-1.json"], "no temporary file left"


def test_a_reports_reading_asks_for_a_fold_only_when_it_found_old_objects_and_says_a_refusal(monkeypatch):
    """The CLI and the Capacity page fold through one rule (``report_reading.fold_if_due``)."""
    from airflow_sm_prefs.evidence import report_reading

    asked: list[object] = []

    def folds(root, reading):
        asked.append(reading)
        return ledger_compaction.Compaction(folded=2, files=1)

    monkeypatch.setattr(ledger_compaction, "compact_if_due", folds)
    local, none_old, some_old = (ledger_reading.Reading([], 0, [], None, old) for old in (None, 0, 5))
    assert report_reading.fold_if_due("root", local) is None and report_reading.fold_if_due("root", none_old) is None
    assert asked == []
    assert report_reading.fold_if_due("root", some_old) == report_reading.Fold(folded=2, files=1)

    def refused(root, reading):
        raise PermissionError("Access Denied")

    monkeypatch.setattr(ledger_compaction, "compact_if_due", refused)
    fold = report_reading.fold_if_due("root", some_old)
    assert fold is not None and isinstance(fold.refused, PermissionError) and fold.folded == 0

    def badly_set(root, reading):
        raise object_storage.StorageSettingError("[sm_prefs] ledger_compact_after = 'x'")

    monkeypatch.setattr(ledger_compaction, "compact_if_due", badly_set)
    with pytest.raises(object_storage.StorageSettingError):
        report_reading.fold_if_due("root", some_old)
