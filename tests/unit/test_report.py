"""The capacity ledger and report, on entries made by hand: verdicts, figures, formats, bad entries."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pendulum
import pytest

from airflow_sm_prefs.analysis import report, report_text
from airflow_sm_prefs.evidence import ledger, ledger_compaction, ledger_entry, ledger_reading, ledger_writing
from airflow_sm_prefs.facts import job_facts

PREFERENCES = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]
TYPES = {0: ("ml.p5.48xlarge", 1), 1: ("ml.p4d.24xlarge", 2)}


def entry(
    name: str,
    rank: int | None,
    outcome: str = "completed",
    pending: float = 600.0,
    run: float | None = 3600.0,
    task_id: str = "fine_tune",
    created: str = "2026-11-29T02:00:00+00:00",
    **extra: Any,
) -> dict[str, Any]:
    instance_type, count = TYPES[rank] if rank is not None else (None, None)
    return {
        "format": 1,
        "dag_id": "nightly",
        "task_id": task_id,
        "run_id": f"scheduled__{name}",
        "map_index": -1,
        "job_name": name,
        "job_arn": None,
        "job_kind": "training",
        "region": "us-east-1",
        "outcome": outcome,
        "preferences": PREFERENCES,
        "selected_instance_type": instance_type,
        "selected_instance_count": count,
        "selected_rank": rank,
        "plan_backed": False,
        "pending_seconds": pending,
        "run_seconds": run if rank is not None else None,
        "billable_instance_seconds": None,
        "failure_reason": None,
        "created_at": created,
        "started_at": None,
        "ended_at": None,
        "recorded_at": created,
        "source": "task",
        **extra,
    }


def test_fallbacks_that_finish_sooner_paid_off():
    entries = [entry("a", 0, pending=7200), entry("b", 1, pending=300), entry("c", 1, pending=200)]
    (row,) = report.summarize(entries)
    assert (row["runs"], row["fallback_rate"], row["rank_counts"]) == (3, 0.6667, {"#1": 1, "#2": 2})
    assert row["verdict"] == "paid_off", row["reason"]
    assert "the first choice would have taken a median 2h00m00s" in row["reason"]
    assert "pays off if the first choice would have stayed unavailable for more than 3m20s" in row["reason"]


def test_fallbacks_that_waited_long_for_any_entry_paid_off_for_the_first_choice_was_busy_as_long():
    """The old rule called these a loss (they took longer than the job that got the first choice); but they
    waited in SageMaker's queue with the first choice listed, so it was busy for them all that time."""
    entries = [entry("a", 0, pending=60), entry("b", 1, pending=9000), entry("c", 1, pending=8000)]
    (row,) = report.summarize(entries)
    assert row["verdict"] == "paid_off", row["reason"]
    assert "the first choice would have taken more than 2h30m00s in most" in row["reason"]


def test_fallbacks_that_run_longer_than_waiting_would_have_taken_did_not_pay_off():
    entries = [
        entry("a", 0, pending=300, run=3600),
        entry("b", 1, pending=60, run=10800),
        entry("c", 1, pending=60, run=10800),
    ]
    (row,) = report.summarize(entries)
    assert row["verdict"] == "did_not_pay_off" and "waiting would have finished sooner" in row["reason"]
    assert "the first choice was free after a median 5m00s" in row["reason"]
    assert "unavailable for more than 2h01m00s" in row["reason"]  # 1 min wait + 3 h run - 1 h run


CUDA = "AlgorithmError: CUDA error: no kernel image is available for execution on the device (exit code 1)"
NO_BUCKET = "ClientError: Artifact upload failed: the bucket 'bucket' does not exist (output 'model', s3://bucket/out)."


def test_a_fallback_that_fails_on_its_hardware_is_an_incompatible_fallback():
    failed = entry("c", 1, outcome="failed_after_start", run=120, failure_reason=CUDA)
    entries = [entry("a", 0), entry("b", 0), failed, entry("d", 1)]
    (row,) = report.summarize(entries)
    assert row["verdict"] == "incompatible_fallback"
    assert row["reason"] == "2 x ml.p4d.24xlarge (#2) failed on its hardware in 1 of 2 jobs; the first choice in 0 of 2"
    fallback = next(c for c in row["configurations"] if c["rank"] == 1)
    assert (fallback["failed_after_start"], fallback["hardware_failures"]) == (1, 1)
    assert fallback["failures_by_cause"] == {"hardware": 1} and fallback["preference"] == "#2"
    assert row["summary"].startswith("fell back in 2 of 4 jobs: 2 x ml.p4d.24xlarge (#2) failed on its hardware")


def test_a_fallback_that_fails_on_the_request_is_counted_apart_and_never_blamed():
    failed = entry("c", 1, outcome="failed_after_start", run=120, failure_reason=NO_BUCKET)
    entries = [entry("a", 0, pending=7200), entry("b", 1), failed, entry("d", 1)]
    (row,) = report.summarize(entries)
    assert row["verdict"] != "incompatible_fallback", row["reason"]
    assert row["failures_by_cause"] == {"configuration": 1}
    assert (
        "1 job failed on the request itself (ClientError: Artifact upload failed: the bucket 'bucket'" in row["summary"]
    )
    fallback = next(c for c in row["configurations"] if c["rank"] == 1)
    assert (fallback["failed_after_start"], fallback["hardware_failures"]) == (1, 0)


def test_an_older_entry_without_a_cause_is_judged_by_its_reason():
    """Entries written before causes were recorded: the reader gives them the cause of their reason."""
    cuda = {**entry("c", 1, outcome="failed_after_start", failure_reason=CUDA), "failure_cause": None}
    (row,) = report.summarize([entry("a", 0), entry("b", 0), cuda, entry("d", 1)])
    assert row["verdict"] == "incompatible_fallback"
    # A recorded cause stands: a code failure recorded as such is not read again from its text.
    recorded = {**cuda, "failure_cause": "code"}
    (row,) = report.summarize([entry("a", 0), entry("b", 0), recorded, entry("d", 1)])
    assert row["verdict"] != "incompatible_fallback" and row["failures_by_cause"] == {"code": 1}


def test_a_code_failure_the_same_task_instance_then_completed_elsewhere_is_the_hardware():
    """The same DAG run's retry, on the same inputs, completed on another configuration: the code is not at fault."""
    crash = "AlgorithmError: Segmentation fault (exit code 139)"
    first_try = entry("c", 1, outcome="failed_after_start", failure_reason=crash, run_id="scheduled__n")
    retry = entry("c2", 0, run_id="scheduled__n")
    (row,) = report.summarize([entry("a", 0), entry("b", 0), first_try, retry, entry("d", 1)])
    assert row["verdict"] == "incompatible_fallback" and row["failures_by_cause"] == {"hardware": 1}
    # On another night, with nothing completed on another configuration, the same crash is the code's.
    alone = entry("c", 1, outcome="failed_after_start", failure_reason=crash, run_id="scheduled__m")
    (row,) = report.summarize([entry("a", 0), entry("b", 0), alone, entry("d", 1)])
    assert row["failures_by_cause"] == {"code": 1} and row["verdict"] != "incompatible_fallback"


def test_too_few_jobs_or_no_fallback_is_not_enough_data():
    (few,) = report.summarize([entry("a", 1), entry("b", None, outcome="no_capacity")])
    assert few["verdict"] == "not_enough_data" and few["no_capacity"] == 1
    (steady,) = report.summarize([entry(n, 0) for n in "abc"])
    assert steady["verdict"] == "not_enough_data" and "no job fell back" in steady["reason"]
    assert steady["fallback_rate"] == 0.0


def test_figures_per_configuration_and_unknown_cost():
    entries = [entry(n, 1, run=run) for n, run in zip("abcd", (100, 200, 300, 400), strict=True)]
    (row,) = report.summarize(entries)
    (configuration,) = row["configurations"]
    assert (configuration["run_seconds_p50"], configuration["run_seconds_p90"]) == (200, 400)
    assert configuration["time_to_result_seconds_p50"] == 800
    assert configuration["estimated_cost_usd_p50"] is None


def test_filters_by_dag_task_and_window():
    entries = [entry("old", 1, created="2026-10-01T00:00:00+00:00"), entry("new", 1), entry("p", 0, task_id="prepare")]
    since = pendulum.datetime(2026, 11, 1)
    rows = report.summarize(entries, since=since)
    assert [(r["task_id"], r["runs"]) for r in rows] == [("fine_tune", 1), ("prepare", 1)]
    assert [r["task_id"] for r in report.summarize(entries, task_id="prepare")] == ["prepare"]


@pytest.mark.parametrize("output_format", ["json", "csv", "table"])
def test_every_format_carries_the_verdict(output_format):
    rows = report.summarize([entry("a", 0, pending=7200), entry("b", 1), entry("c", 1)])
    text = report_text.render(rows, output_format)
    if output_format == "json":
        assert json.loads(text)[0]["verdict"] == "paid_off"
    elif output_format == "csv":
        (parsed,) = list(csv.DictReader(io.StringIO(text)))
        assert (parsed["verdict"], json.loads(parsed["rank_counts"])) == ("paid_off", {"#1": 1, "#2": 2})
    else:
        assert "nightly / fine_tune" in text and "paid_off" in text and "cost p50 unknown" in text


def test_entries_round_trip_and_a_rewrite_does_not_count_twice(tmp_path):
    from airflow.sdk import ObjectStoragePath

    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    assert ledger_writing.write(entry("a", 1), root) and ledger_writing.write(entry("a", 1), root)
    reading = ledger_reading.read(root)
    assert [e["job_name"] for e in reading.entries] == ["a"] and reading.bad == 0
    assert ledger.known_jobs(root).names == {"a"}


def test_bad_entries_are_counted_and_skipped_never_fatal(tmp_path):
    from airflow.sdk import ObjectStoragePath

    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    ledger_writing.write(entry("good", 1, surprise="an unknown field is dropped"), root)
    folder = tmp_path / "ledger" / "nightly"
    (folder / "truncated.json").write_text(json.dumps(entry("t", 1))[:40])
    (folder / "list.json").write_text("[1, 2]")
    (folder / "older.json").write_text(json.dumps({**entry("o", 1), "format": 0}))
    (folder / "odd.json").write_text(json.dumps(entry("x", 1, outcome="exploded")))
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00")
    (folder / "when.json").write_text(json.dumps(entry("w", 1, created="last tuesday")))
    (folder / "rank.json").write_text(json.dumps({**entry("r", 1), "selected_rank": "second"}))
    (folder / "run.json").write_text(json.dumps({**entry("n", 1), "run_seconds": "long"}))
    reading = ledger_reading.read(root)
    assert [e["job_name"] for e in reading.entries] == ["good"]
    assert "surprise" not in reading.entries[0]
    assert reading.bad == 8 and len(reading.bad_examples) == 5
    (row,) = report.summarize(reading.entries, since=pendulum.datetime(2026, 1, 1))
    assert row["runs"] == 1, "what was readable is reported"


def test_a_ledger_that_cannot_be_written_warns_and_returns(tmp_path, caplog):
    from airflow.sdk import ObjectStoragePath

    blocker = tmp_path / "file-not-folder"
    blocker.write_text("x")
    assert ledger_writing.write(entry("a", 1), ObjectStoragePath(f"file://{blocker}")) is False
    assert "Could not record SageMaker job a in the capacity ledger" in caplog.text


def test_how_a_job_ended():
    from airflow_sm_prefs.request.jobs import TRAINING
    from airflow_sm_prefs.sagemaker.job_view import JobView

    def view(**description: Any) -> JobView:
        return JobView.parse(TRAINING, {"TrainingJobName": "j", "ResourceConfig": {}, **description})

    started = {"TrainingStartTime": "2026-11-30T01:00:00+00:00"}
    assert job_facts.outcome_of(view(TrainingJobStatus="Completed", **started)) == "completed"
    assert job_facts.outcome_of(view(TrainingJobStatus="Failed", **started)) == "failed_after_start"
    assert job_facts.outcome_of(view(TrainingJobStatus="Stopped", **started)) == "stopped"
    never = view(TrainingJobStatus="Stopped", FailureReason="CapacityError: no capacity within the limit")
    assert job_facts.outcome_of(never) == "no_capacity"
    assert job_facts.outcome_of(view(TrainingJobStatus="Stopped")) == "stopped", "a user stopped it while it waited"
    # The task gave up waiting and stopped it: no capacity in the time allowed, or stopped once it ran.
    assert job_facts.outcome_of(view(TrainingJobStatus="Stopped"), task_gave_up=True) == "no_capacity"
    assert job_facts.outcome_of(view(TrainingJobStatus="Stopping", **started), task_gave_up=True) == "stopped"
    assert job_facts.outcome_of(view(TrainingJobStatus="Completed", **started), task_gave_up=True) == "stopped"


def test_a_plain_local_path_works_as_a_ledger_root(tmp_path):
    root = tmp_path / "ledger"
    assert ledger_writing.write(entry("a", 1), root)
    assert [e["job_name"] for e in ledger_reading.read(root).entries] == ["a"]


# -- costs -------------------------------------------------------------------------------------------------------


def test_fallbacks_that_finish_sooner_but_cost_too_much_did_not_pay_off():
    entries = [
        entry("a", 0, pending=7200, estimated_cost_usd=100.0),
        entry("b", 1, pending=300, estimated_cost_usd=160.0),
        entry("c", 1, pending=200, estimated_cost_usd=140.0),
    ]
    (row,) = report.summarize(entries)
    assert row["verdict"] == "did_not_pay_off"
    assert "+40% against the first choice's $100.00" in row["reason"] and "25% premium" in row["reason"]
    assert [c["estimated_cost_usd_p50"] for c in row["configurations"]] == [100.0, 140.0]
    (generous,) = report.summarize(entries, max_cost_premium=0.5)
    assert generous["verdict"] == "paid_off" and "+40%" in generous["reason"]


def test_a_cost_known_on_one_side_only_is_not_judged_and_never_taken_as_zero():
    entries = [
        entry("a", 0, pending=7200, estimated_cost_usd=None),
        entry("b", 1, pending=300, estimated_cost_usd=500.0),
        entry("c", 1, pending=200, estimated_cost_usd=500.0),
    ]
    (row,) = report.summarize(entries)
    assert row["verdict"] == "paid_off" and "cost not judged" in row["reason"]
    assert row["configurations"][0]["estimated_cost_usd_p50"] is None
    assert "cost p50 unknown" in report_text.render([row], "table")
    assert "cost p50 $500.00" in report_text.render([row], "table")


def test_entries_written_before_costs_existed_read_as_unknown_cost():
    old = entry("a", 0)
    old.pop("estimated_cost_usd", None)
    old.pop("cost_basis", None)
    (row,) = report.summarize([old])
    assert row["configurations"][0]["estimated_cost_usd_p50"] is None


# -- compaction ----------------------------------------------------------------------------------------------------


def _recorded(name: str, rank: int | None, recorded: str, **extra: Any) -> dict[str, Any]:
    return {**entry(name, rank, **extra), "recorded_at": recorded}


NOW = pendulum.datetime(2026, 11, 30, 12, tz="UTC")


def test_compaction_folds_old_entries_by_month_and_the_report_reads_the_same(tmp_path):
    root = tmp_path / "ledger"
    for night in range(6):
        created = f"2026-{10 + night % 2:02d}-{1 + night:02d}T02:00:00+00:00"
        ledger_writing.write(_recorded(f"n{night}", night % 2, "2026-11-01T00:00:00+00:00", created=created), root)
    ledger_writing.write(_recorded("today", 0, "2026-11-30T11:00:00+00:00"), root)
    before = report.summarize(ledger_reading.read(root).entries)
    result = ledger_compaction.compact(root, now=NOW)
    assert (result.folded, result.kept, result.files) == (6, 1, 2)
    assert sorted(p.name for p in (root / "nightly" / "compacted").iterdir()) == ["2026-10.jsonl", "2026-11.jsonl"]
    assert sorted(p.name for p in (root / "nightly").glob("*.json")) == ["today.us-east-1.json"]
    assert report.summarize(ledger_reading.read(root).entries) == before
    assert ledger_compaction.compact(root, now=NOW).folded == 0  # nothing more to fold
    assert ledger.known_jobs(root).names == {f"n{night}" for night in range(6)} | {"today"}


def test_a_jobs_own_file_written_after_compaction_wins_and_a_second_compaction_merges(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(_recorded("a", 1, "2026-11-01T00:00:00+00:00", outcome="stopped"), root)
    ledger_compaction.compact(root, now=NOW)
    ledger_writing.write(_recorded("a", 1, "2026-11-02T00:00:00+00:00"), root)  # a backfill saw it complete
    ledger_writing.write(_recorded("b", 0, "2026-11-02T00:00:00+00:00"), root)
    (a,) = [e for e in ledger_reading.read(root).entries if e["job_name"] == "a"]
    assert a["outcome"] == "completed"
    ledger_compaction.compact(root, now=NOW)
    reading = ledger_reading.read(root)
    assert sorted((e["job_name"], e["outcome"]) for e in reading.entries) == [("a", "completed"), ("b", "completed")]
    (month,) = (root / "nightly" / "compacted").iterdir()
    assert len(month.read_text().splitlines()) == 2


def test_a_bad_line_in_a_month_file_is_counted_not_fatal(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(_recorded("a", 0, "2026-11-01T00:00:00+00:00"), root)
    ledger_compaction.compact(root, now=NOW)
    month = root / "nightly" / "compacted" / "2026-11.jsonl"
    month.write_text(month.read_text() + "{not json\n" + json.dumps({"format": 1}) + "\n")
    reading = ledger_reading.read(root)
    assert [e["job_name"] for e in reading.entries] == ["a"] and reading.bad == 2
    assert "2026-11.jsonl line 2: not JSON" in reading.bad_examples


def test_a_report_reads_only_the_fields_it_needs_of_the_dags_it_may(tmp_path):
    root = tmp_path / "ledger"
    ledger_writing.write(entry("a", 0), root)
    ledger_writing.write({**entry("b", 0), "dag_id": "secret"}, root)
    reading = ledger_reading.read(root, dags={"nightly"}, fields=ledger_entry.REPORT_FIELDS)
    (only,) = reading.entries
    assert only["job_name"] == "a" and set(only) == set(ledger_entry.REPORT_FIELDS)


def test_a_configuration_whose_runs_drift_from_its_benchmark_is_flagged():
    entries = [entry(f"a{n}", 0, run=3000.0, certified_run_seconds=2000.0) for n in range(3)]
    entries += [entry(f"b{n}", 1, run=3600.0, certified_run_seconds=3500.0) for n in range(3)]
    (row,) = report.summarize(entries)
    first, fallback = row["configurations"]
    assert (first["run_time_vs_certified_p50"], first["drifted"]) == (1.5, True)
    assert (fallback["run_time_vs_certified_p50"], fallback["drifted"]) == (1.029, False)
    assert "x1.50 its certified 33m20s DRIFTED" in report_text.render([row], "table")
    (lenient,) = report.summarize(entries, drift_tolerance=0.6)
    assert not lenient["configurations"][0]["drifted"]


@pytest.mark.parametrize("output", ["table", "json", "csv"])
def test_rows_kept_as_json_between_runs_render_as_the_rows_computed(output):
    """The CLI keeps a report's rows as JSON (``kept_reports.remembered_rows``): they must print the same."""
    entries = [entry("a", 0, pending=7200), entry("b", 1, pending=300, estimated_cost_usd=3.5), entry("c", None)]
    rows = report.summarize(entries)
    assert report_text.render(json.loads(json.dumps(rows)), output) == report_text.render(rows, output)


def test_what_the_cli_keeps_between_runs_is_signed_by_every_module_whose_code_makes_it(monkeypatch):
    """A kept reading holds each file's entries as ``ledger_files`` judged and kept them (an older entry's cause
    filled in by ``failure_cause``); kept rows hold what the report made of them. A new version of any of those
    modules must make the CLI read and compute again, never serve what the old code made."""
    from airflow_sm_prefs.analysis import counterfactual, kept_reports, survival
    from airflow_sm_prefs.evidence import ledger, ledger_cache, ledger_entry, ledger_files
    from airflow_sm_prefs.facts import failure_cause
    from airflow_sm_prefs.platform import formatting

    signed: list[set[Any]] = []
    monkeypatch.setattr(ledger_cache, "code_digest", lambda *modules: signed.append(set(modules)) or "")
    ledger_cache.reader_digest.cache_clear()
    kept_reports._code_digest.cache_clear()
    try:
        kept_reports._code_digest()  # the report's code, then the reader's
    finally:  # the next caller computes the real digests again
        ledger_cache.reader_digest.cache_clear()
        kept_reports._code_digest.cache_clear()
    rows, reader = signed
    rows |= reader
    assert {ledger, ledger_entry, ledger_files, failure_cause, ledger_cache} <= reader
    assert reader | {report, counterfactual, survival, formatting} <= rows


# -- what happened, before the verdict ----------------------------------------------------------------------------


def test_the_lead_says_the_trade_off_in_time_and_cost_before_the_verdict():
    costs = {"a": 10.0, "b": 20.0, "c": 20.0}
    entries = [
        entry("a", 0, pending=7200, estimated_cost_usd=costs["a"]),
        entry("b", 1, pending=300, estimated_cost_usd=costs["b"]),
        entry("c", 1, pending=200, estimated_cost_usd=costs["c"]),
    ]
    (row,) = report.summarize(entries)
    # The first choice would have taken 2h00m00s; the fallbacks pay off past 3m20s: 1h56m40s sooner, at +100%.
    assert row["summary"] == "fell back in 2 of 3 jobs: results ~1h56m40s sooner, +100% cost per job (allowed +25%)"
    assert row["verdict"] == "did_not_pay_off"
    (within,) = report.summarize(entries, max_cost_premium=1.5)
    assert within["summary"].endswith("+100% cost per job (allowed +150%)") and within["verdict"] == "paid_off"
    table = report_text.render([row], "table").splitlines()
    assert table[2].endswith(row["summary"]) and table[3].startswith("    verdict did_not_pay_off: ")


def test_the_lead_says_when_waiting_would_have_been_sooner_and_when_the_cost_is_unknown():
    entries = [entry("a", 0, pending=60), entry("b", 1, pending=9000), entry("c", 1, pending=8000)]
    (row,) = report.summarize(entries)
    # Seen busy 2h30m00s at most against a break-even of 2h13m20s: a lower bound, and no price on either side.
    assert row["summary"] == "fell back in 2 of 3 jobs: results more than 16m40s sooner"
    late = [
        entry("a", 0, pending=60, run=600),
        entry("b", 1, pending=120, run=9000, created="2026-11-29T02:00:30+00:00"),
        entry("c", 1, pending=10, run=9000),
    ]
    (slow,) = report.summarize(late)
    assert slow["verdict"] == "did_not_pay_off" and "waiting would have finished sooner" in slow["reason"]
    assert slow["summary"] == "fell back in 2 of 3 jobs: waiting would have given results ~2h19m10s sooner"


def test_the_report_says_no_zero_of_zero_no_one_jobs_and_no_unlabelled_figure():
    failed = entry("c", 1, outcome="failed_after_start", failure_reason=CUDA)
    rows = report.summarize([entry("b", 1), failed, entry("d", 1)])
    text = report_text.render(rows, "table")
    assert "0 of 0" not in text and "1 jobs" not in text and "job(s)" not in text
    assert "the first choice never ran in the window" in rows[0]["reason"]
    (few,) = report.summarize([entry("a", 1)])
    assert few["reason"].startswith("1 job got capacity")


def test_one_off_tasks_are_listed_after_the_recurring_ones():
    nightly = [entry(n, 1) for n in "abc"]
    once = entry("z", 0, task_id="aaa_certify", run_id="manual__cert")
    rows = report.summarize([*nightly, once])
    assert {r["task_id"]: r["recurring"] for r in rows} == {"aaa_certify": False, "fine_tune": True}
    lines = report_text.render(rows, "table").splitlines()
    title = lines.index("One-off tasks (one DAG run each):")
    assert any("fine_tune" in line for line in lines[:title]) and any("aaa_certify" in line for line in lines[title:])
    assert report_text.render([r for r in rows if not r["recurring"]], "table").count("One-off") == 0


def test_ranks_read_the_same_in_every_format():
    rows = report.summarize([entry("a", 0), entry("b", 1), entry("c", 1)])
    assert rows[0]["rank_counts"] == {"#1": 1, "#2": 2}
    assert [c["preference"] for c in rows[0]["configurations"]] == ["#1", "#2"]
    assert "    #2 2 x ml.p4d.24xlarge: 2 jobs" in report_text.render(rows, "table")


def test_a_hardware_failure_the_verdict_does_not_name_is_in_the_lead():
    """On the first choice (or a one-off task's only job): no fallback to blame, but the reader is told."""
    failed = entry("c", 0, outcome="failed_after_start", failure_reason=CUDA)
    (row,) = report.summarize([entry("a", 0), entry("b", 0), failed])
    assert row["verdict"] == "not_enough_data"
    assert row["summary"] == (
        "fell back in 0 of 3 jobs; 1 job failed on its hardware (AlgorithmError: CUDA error: no kernel image is "
        "available for execution on the device (exit code 1))"
    )
    blamed = entry("c", 1, outcome="failed_after_start", failure_reason=CUDA)
    (row,) = report.summarize([entry("a", 0), entry("b", 0), blamed, entry("d", 1)])
    assert row["verdict"] == "incompatible_fallback" and "failed on its hardware (" not in row["summary"]


def test_the_reader_gives_an_older_entry_the_cause_of_its_reason(tmp_path):
    older = entry("c", 1, outcome="failed_after_start", failure_reason=NO_BUCKET)  # written with no failure_cause
    ledger_writing.write(older, tmp_path)  # type: ignore[arg-type]
    (read,) = ledger_reading.read(tmp_path).entries
    assert read["failure_cause"] == "configuration"
    (kept,) = ledger_reading.read(tmp_path, fields=ledger_entry.REPORT_FIELDS).entries
    assert kept["failure_cause"] == "configuration"


def test_a_long_failure_reason_is_cut_in_the_lead_and_the_latest_is_quoted():
    long = "ClientError: " + "x" * 300
    failed = [
        entry(
            "c",
            1,
            outcome="failed_after_start",
            failure_reason="ClientError: older",
            created="2026-11-28T02:00:00+00:00",
        ),
        entry("e", 1, outcome="failed_after_start", failure_reason=long, created="2026-11-30T02:00:00+00:00"),
    ]
    (row,) = report.summarize([entry("a", 0), entry("b", 1), *failed])
    quoted = row["summary"].split("failed on the request itself (", 1)[1]
    assert quoted == long[: report.LEAD_REASON_CHARACTERS - 3] + "...)" and "older" not in row["summary"]
    assert report.LEAD_REASON_CHARACTERS == 160


def test_the_lead_counts_the_jobs_that_got_no_capacity():
    never = [entry(n, None, outcome="no_capacity") for n in "xy"]
    (row,) = report.summarize([entry("a", 0), entry("b", 0), *never])
    assert row["summary"] == "fell back in 0 of 2 jobs; 2 jobs got no capacity"
