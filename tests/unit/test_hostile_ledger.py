"""The capacity ledger as untrusted input: file kinds x readers, hostile values x fields, ids x writers.

Anyone who can write to the ledger's folder can put anything there. One bad file costs its own entry (counted
and named), never the report, the Capacity page or the process; a DAG id is a folder name only once made safe.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_sm_prefs.analysis import report, report_text
from airflow_sm_prefs.evidence import ledger, ledger_compaction, ledger_entry, ledger_reading, ledger_writing
from airflow_sm_prefs.surface import capacity_page, cli
from tests.helpers import plant_file
from tests.unit.test_report import NOW, _recorded, entry


def _finishes(work: Any, seconds: float = 20.0) -> Any:
    """``work()``'s value; fails (instead of hanging the suite) if it does not return in time."""
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.setdefault("value", work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the reader hung"
    return result["value"]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ledger"
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{folder}")
    for name, rank in (("a", 0), ("b", 1), ("c", 1)):
        ledger_writing.write(entry(name, rank), folder)  # type: ignore[arg-type]
    return folder


def _plant(folder: Path, kind: str, name: str) -> None:
    plant_file(folder / name, kind, size=ledger.MAX_ENTRY_BYTES)


FILE_KINDS = ("fifo", "device", "folder", "dangling symlink", "huge")


def _page(monkeypatch: pytest.MonkeyPatch) -> TestClient:
    from tests.helpers import capacity_app_for

    monkeypatch.setattr(capacity_page, "readable_dags", lambda user: {"nightly"})
    return TestClient(capacity_app_for({"nightly"}))


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_a_job_file_that_is_not_a_small_regular_file_costs_its_entry_only(root, kind, monkeypatch, capsys):
    _plant(root / "nightly", kind, "planted.json")
    reading = _finishes(lambda: ledger_reading.read(root))
    assert sorted(e["job_name"] for e in reading.entries) == ["a", "b", "c"]
    assert reading.bad == 1 and reading.bad_examples[0].startswith("planted.json: ")
    client = _page(monkeypatch)
    for route in ("/capacity", "/capacity/report", "/capacity/weather"):
        answer = _finishes(lambda route=route: client.get(route))
        assert answer.status_code == 200, (route, answer.text[:300])
    capsys.readouterr()  # what the page's requests logged
    assert _finishes(lambda: cli.main(["report", "--format", "json"])) == 0
    assert json.loads(capsys.readouterr().out)[0]["runs"] == 3


@pytest.mark.parametrize("kind", ("fifo", "device", "folder"))
def test_a_month_file_that_is_not_a_regular_file_costs_its_month_only(root, kind):
    compacted = root / "nightly" / ledger.COMPACTED
    compacted.mkdir()
    _plant(compacted, kind, "2026-10.jsonl")
    reading = _finishes(lambda: ledger_reading.read(root))
    assert (len(reading.entries), reading.bad) == (3, 1)


def test_one_bad_byte_in_a_month_costs_its_line_not_the_month(tmp_path):
    root = tmp_path / "ledger"
    for name in "abcd":
        ledger_writing.write(_recorded(name, 1, "2026-11-01T00:00:00+00:00"), root)  # type: ignore[arg-type]
    ledger_compaction.compact(root, now=NOW)
    month = root / "nightly" / "compacted" / "2026-11.jsonl"
    lines = month.read_bytes().splitlines()
    lines[1] = lines[1].replace(b"nightly", b"night\xffly")
    month.write_bytes(b"\n".join(lines) + b"\n")
    reading = ledger_reading.read(root)
    assert (len(reading.entries), reading.bad) == (3, 1)
    assert (
        reading.bad_examples == ["2026-11.jsonl line 2: not UTF-8 (byte 119)"] or "not UTF-8" in reading.bad_examples[0]
    )


HOSTILE_VALUES = {
    "NaN seconds": ('"run_seconds": 3600.0', '"run_seconds": NaN'),
    "Infinity wait": ('"pending_seconds": 600.0', '"pending_seconds": Infinity'),
    "negative wait": ('"pending_seconds": 600.0', '"pending_seconds": -5'),
    "a true run time": ('"run_seconds": 3600.0', '"run_seconds": true'),
    "a dict for a type": ('"selected_instance_type": "ml.p4d.24xlarge"', '"selected_instance_type": {"a": 1}'),
    "a list for a Region": ('"region": "us-east-1"', '"region": ["us-east-1"]'),
    "preferences of strings": ('"preferences": [', '"preferences": ["ml.p5.48xlarge", '),
    "a count as text": ('"InstanceCount": 1,', '"InstanceCount": "1",'),
    "an ARN as a number": ('"job_arn": null', '"job_arn": 7'),
    "plan_backed as text": ('"plan_backed": false', '"plan_backed": "no"'),
    "nested 100,000 deep": ('"workload": null', '"workload": ' + "[" * 100_000 + "]" * 100_000),
    "billed seconds as text": ('"billable_instance_seconds": null', '"billable_instance_seconds": "lots"'),
    "a failure reason as a list": ('"failure_reason": null', '"failure_reason": ["out of memory"]'),
    "a recording time that is not one": ('"recorded_at": "2026-11-29T02:00:00+00:00"', '"recorded_at": "yesterday"'),
    "a source as a number": ('"source": "task"', '"source": 3'),
    "a rank before the first": ('"selected_rank": 1', '"selected_rank": -1'),
    "a rank past the fifth": ('"selected_rank": 1', '"selected_rank": 5'),
    "no instances": ('"selected_instance_count": 2', '"selected_instance_count": 0'),
    "a map index below -1": ('"map_index": -1', '"map_index": -2'),
    "a cause no rule gives": ('"failure_cause": null', '"failure_cause": "cosmic rays"'),
    "a cause as a number": ('"failure_cause": null', '"failure_cause": 1'),
    "utilization as text": ('"utilization": null', '"utilization": "busy"'),
    "a metric no one publishes": ('"utilization": null', '"utilization": {"fan": {"mean": 1, "p90": 2}}'),
    "a negative mean": ('"utilization": null', '"utilization": {"gpu": {"mean": -1, "p90": 2}}'),
    "a p90 as text": ('"utilization": null', '"utilization": {"gpu": {"mean": 1, "p90": "high"}}'),
}


def test_the_schema_the_reader_judges_is_the_entry_the_writer_writes():
    from airflow_sm_prefs.facts.job_facts import JobFacts
    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.job_view import JobView
    from tests.unit.test_record import training_description

    assert list(ledger_entry.SCHEMA) == list(ledger_entry.LedgerEntry.__annotations__)
    written = ledger_entry.entry_for(
        JobFacts.of(JobView.parse(TRAINING, training_description()), "us-east-1"),
        dag_id="d",
        task_id="t",
        run_id="r",
        map_index=-1,
    )
    assert set(written) == set(ledger_entry.SCHEMA)
    assert ledger_entry.why_unusable(json.loads(json.dumps(written))) is None
    judged = {
        key
        for kind in ("_NUMBERS", "_TEXTS", "_FLAGS", "_INTEGERS", "_TIMES", "_CAUSES", "_UTILIZATIONS")
        for key in getattr(ledger_entry, kind)
    }
    assert judged | {key for key, _ in ledger_entry._REQUIRED} | {"format"} == set(ledger_entry.SCHEMA), (
        "every field is judged"
    )


def test_the_report_holds_every_field_but_those_no_view_shows():
    """The fields are stated once, in ``LedgerEntry``; which of them a report keeps is pinned here."""
    left_out = {"format", "billable_instance_seconds", "workload", "started_at", "ended_at", "recorded_at", "source"}
    assert set(ledger_entry.REPORT_FIELDS) == set(ledger_entry.SCHEMA) - left_out
    assert ledger_entry.SCHEMA["pending_seconds"] == "amount" and ledger_entry.SCHEMA["run_id"] == "text?"


@pytest.mark.parametrize("case", HOSTILE_VALUES)
def test_a_hostile_value_in_any_field_is_refused_on_read(root, case, monkeypatch):
    text = json.dumps(entry("hostile", 1, workload=None, failure_cause=None, utilization=None), sort_keys=True)
    original, hostile = HOSTILE_VALUES[case]
    assert original in text, case
    (root / "nightly" / "hostile.json").write_text(text.replace(original, hostile, 1))
    reading = ledger_reading.read(root)
    assert sorted(e["job_name"] for e in reading.entries) == ["a", "b", "c"] and reading.bad == 1, case
    rows = report.summarize(reading.entries)
    assert rows[0]["runs"] == 3
    json.dumps(rows, allow_nan=False)  # what the report prints is valid JSON
    report_text.render(rows, "table")
    assert _page(monkeypatch).get("/capacity").status_code == 200


def test_a_folder_that_cannot_be_listed_costs_its_dag_only(root, monkeypatch):
    ledger_writing.write({**entry("x", 1), "dag_id": "other"}, root)  # type: ignore[typeddict-unknown-key]
    listing = Path.iterdir

    def refuse(self: Path):
        if self.name == "other":
            raise PermissionError(13, "Permission denied")
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", refuse)
    reading = ledger_reading.read(root)
    assert len(reading.entries) == 3 and reading.bad == 1 and "other/" in reading.bad_examples[0]


def test_a_ledger_root_that_is_a_file_is_one_line_never_a_traceback(tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "ledger"
    a_file.write_text("not a folder")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{a_file}")
    for argv in (["report"], ["weather"], ["advise", "--dag-id", "d", "--task-id", "t"], ["ledger", "compact"]):
        assert cli.main(argv) == 2, argv
        error = capsys.readouterr().err.strip()
        assert error.startswith("airflow-sm-prefs: error:") and "is a file, not a folder" in error, argv
        assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert ledger_reading.read(a_file).bad == 1, "the page's reader counts it and goes on"


@pytest.mark.parametrize("dag_id", ["..", ".", "...", ".hidden", "a.b", "naïve", "%2E%2E"])
def test_every_dag_id_stays_inside_the_ledger_and_reads_back_as_itself(tmp_path, dag_id):
    root = tmp_path / "ledger"
    root.mkdir()
    written = {**entry("prices", 1), "dag_id": dag_id}
    assert ledger_writing.write(written, root)  # type: ignore[arg-type]
    inside = {p.relative_to(root) for p in root.rglob("*.json")}
    assert len(inside) == 1 and not (tmp_path / "prices.json").exists()
    (path,) = inside
    assert len(path.parts) == 2 and not path.parts[0].startswith("."), path
    assert [e["dag_id"] for e in ledger_reading.read(root).entries] == [dag_id]
    assert [e["dag_id"] for e in ledger_reading.read(root, dag_id=dag_id).entries] == [dag_id]


def test_ids_that_look_alike_do_not_share_a_folder(tmp_path):
    root = tmp_path / "ledger"
    for dag_id in ("..", "%2E.", "_..", ".."):
        ledger_writing.write({**entry(f"job-{len(dag_id)}-{dag_id.count('%')}", 1), "dag_id": dag_id}, root)  # type: ignore[arg-type]
    folders = sorted(p.name for p in root.iterdir())
    assert len(folders) == 3, folders


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_compaction_and_backfill_pass_over_a_planted_file(root, kind):
    _plant(root / "nightly", kind, "planted.json")
    compacted = root / "nightly" / ledger.COMPACTED
    compacted.mkdir()
    _plant(compacted, kind, "2026-10.jsonl")
    assert _finishes(lambda: ledger.known_jobs(root).names) >= {"a", "b", "c"}
    result = _finishes(lambda: ledger_compaction.compact(root, older_than=dt.timedelta(0)))
    assert result.folded == 3 and result.kept == 1
    assert sorted(e["job_name"] for e in ledger_reading.read(root).entries) == ["a", "b", "c"]


# -- evidence one team cannot bend for another ------------------------------------------------------------------


def _runs(root: Path, dag_id: str = "nightly") -> int:
    (row,) = [r for r in report.summarize(ledger_reading.read(root).entries) if r["dag_id"] == dag_id]
    return int(row["runs"])


def test_an_entry_naming_another_dag_is_refused_where_it_lies_naming_both(root):
    other = root / "other"
    other.mkdir()
    (other / "d.json").write_text(json.dumps(entry("d", 1)))  # says dag_id "nightly", lies in "other"
    reading = ledger_reading.read(root)
    assert _runs(root) == 3, "another DAG's folder adds no run to nightly"
    assert reading.bad == 1
    assert reading.bad_examples == ["d.json: its dag_id 'nightly' is not this folder's DAG (other)"]


def test_one_dags_two_jobs_of_one_name_in_two_regions_keep_two_objects_and_count_twice(root):
    """SageMaker's job names are unique per account and Region: the same name in another Region is another job."""
    ledger_writing.write({**entry("a", 1, pending=30.0), "region": "eu-west-1"}, root)  # type: ignore[arg-type]
    assert sorted(p.name for p in (root / "nightly").glob("a.*")) == ["a.eu-west-1.json", "a.us-east-1.json"]
    assert _runs(root) == 4
    by_region = {e["region"]: e["pending_seconds"] for e in ledger_reading.read(root).entries if e["job_name"] == "a"}
    assert by_region == {"us-east-1": 600.0, "eu-west-1": 30.0}
    known = ledger.known_jobs(root)
    assert known.has("a", "eu-west-1") and known.has("a", "us-east-1") and not known.has("a", "ap-south-1")
    assert not known.has("b", "eu-west-1") and known.has("b", None)


def test_an_object_named_before_the_region_was_is_read_and_a_newer_object_of_the_job_replaces_it(root):
    (root / "nightly" / "old.json").write_text(json.dumps(entry("old", 0, pending=5.0)))
    assert _runs(root) == 4 and ledger_reading.read(root).bad == 0
    known = ledger.known_jobs(root)
    assert known.has("old", "us-east-1") and known.has("old", "eu-west-1"), "its Region is not in its name"
    ledger_writing.write(entry("old", 1, pending=7.0), root)  # type: ignore[arg-type]  # its retry, after the upgrade
    (kept,) = [e for e in ledger_reading.read(root).entries if e["job_name"] == "old"]
    assert kept["pending_seconds"] == 7.0 and _runs(root) == 4
    (root / "nightly" / "a.eu-west-1.json").write_text(json.dumps(entry("a", 0)))  # says us-east-1
    assert ledger_reading.read(root).bad_examples == [
        "a.eu-west-1.json: its job_name and region ('a', 'us-east-1') are not the file's (a.eu-west-1.json)"
    ]


def test_an_entry_whose_job_is_not_its_files_cannot_replace_that_job(root):
    forged = entry("a", 0, pending=999_999)
    (root / "nightly" / "forged.json").write_text(json.dumps(forged))
    reading = ledger_reading.read(root)
    assert reading.bad_examples == [
        "forged.json: its job_name and region ('a', 'us-east-1') are not the file's (forged.json)"
    ]
    (kept,) = [e for e in reading.entries if e["job_name"] == "a"]
    assert kept["pending_seconds"] == 600.0


def test_jobs_of_two_dags_and_regions_with_one_name_are_two_jobs(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(entry("shared-name", 1), root)  # type: ignore[arg-type]
    ledger_writing.write({**entry("shared-name", 0), "dag_id": "weekly", "region": "eu-west-1"}, root)  # type: ignore[arg-type]
    reading = ledger_reading.read(root)
    assert sorted((e["dag_id"], e["region"]) for e in reading.entries) == [
        ("nightly", "us-east-1"),
        ("weekly", "eu-west-1"),
    ]


def test_a_stray_object_where_the_months_should_be_costs_the_months_not_the_dag(root):
    (root / "nightly" / ledger.COMPACTED).write_text("stray")
    reading = ledger_reading.read(root)
    assert _runs(root) == 3
    assert reading.bad == 1 and reading.bad_examples[0].startswith("nightly/compacted/: cannot be listed")


def test_the_bounds_of_ranks_counts_and_map_indexes_take_every_real_value():
    for field, value in (("selected_rank", 0), ("selected_rank", 4), ("selected_instance_count", 1), ("map_index", -1)):
        assert ledger_entry.why_unusable(json.loads(json.dumps({**entry("edge", 1), field: value}))) is None, (
            field,
            value,
        )


def test_ids_from_a_ledger_object_cannot_drive_the_terminal(root, capsys):
    forged = {**entry("forged", 1), "task_id": "fine_tune\x1b[2J\x1b]0;owned\x07\r"}
    (root / "nightly" / "forged.json").write_text(json.dumps(forged))
    for output_format in ("table", "csv", "json"):
        assert cli.main(["report", "--format", output_format]) == 0
        shown = capsys.readouterr()
        assert not any(c in shown.out + shown.err for c in "\x1b\x07\r"), output_format
        assert "fine_tune" in shown.out, output_format
