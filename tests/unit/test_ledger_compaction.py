"""When a reader folds the ledger by itself, and what it refuses to be told."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.evidence import ledger, ledger_compaction
from airflow_sm_prefs.storage import object_storage


@pytest.fixture
def folds(monkeypatch):
    folded = []
    monkeypatch.setattr(
        ledger_compaction, "compact", lambda root: folded.append(root) or ledger_compaction.Compaction()
    )
    return folded


def _reading(old: int | None) -> ledger.Reading:
    return ledger.Reading([], 0, [], None, old)


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
