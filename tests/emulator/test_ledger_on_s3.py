"""The capacity ledger on object storage: ``[sm_prefs] ledger_path = s3://...`` with its connection, written and
read over the S3 API (the emulator's, moto's backend) by the unmodified s3fs the `s3` extra installs."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import (
    ledger,
    ledger_compaction,
    ledger_entry,
    ledger_reading,
    ledger_writing,
    reading_memo,
)
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
        assert ledger_writing.write(entry(name, rank, pending=pending))
    assert _keys(s3_ledger) == [f"sm-prefs/ledger/nightly/{name}.us-east-1.json" for name in "abc"]
    # The installed command in a process of its own, as a user pipes it to jq: nothing but JSON on stdout.
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["dag_id"], row["task_id"], row["runs"]) == ("nightly", "fine_tune", 3)


def test_compaction_folds_the_bucket_into_month_objects_and_loses_nothing(s3_ledger):
    october, today = "2026-10-03T02:00:00+00:00", "2026-12-02T02:00:00+00:00"
    for name in ("a", "b"):
        ledger_writing.write(entry(name, 1, created=october, recorded_at=october))
    ledger_writing.write(entry("recent", 0, created=today, recorded_at=today))
    before = sorted(e["job_name"] for e in ledger_reading.read().entries)
    folded = ledger_compaction.compact(now=dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC))
    assert (folded.folded, folded.files) == (2, 1)
    assert _keys(s3_ledger) == [
        "sm-prefs/ledger/nightly/compacted/2026-10.jsonl",
        "sm-prefs/ledger/nightly/recent.us-east-1.json",
    ]
    assert sorted(e["job_name"] for e in ledger_reading.read().entries) == before


def test_stray_and_misplaced_objects_cost_themselves_on_the_bucket(s3_ledger):
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300)):
        assert ledger_writing.write(entry(name, rank, pending=pending))
    prefix = "sm-prefs/ledger"
    s3_ledger.put_object(Bucket="team-bucket", Key=f"{prefix}/nightly/compacted", Body=b"stray")
    other = json.dumps(entry("c", 1)).encode()  # says dag_id "nightly"
    s3_ledger.put_object(Bucket="team-bucket", Key=f"{prefix}/other/c.json", Body=other)
    reading = ledger_reading.read()
    assert sorted(e["job_name"] for e in reading.entries) == ["a", "b"]
    assert reading.bad == 2, reading.bad_examples
    assert "c.json: its dag_id 'nightly' is not this folder's DAG (other)" in reading.bad_examples


def _a_varied_ledger(root) -> None:
    """Jobs of two DAGs and two Regions, a compacted month with a job written again since, and bad objects of
    each kind a reader meets: what a file system and an object store must read alike."""
    october = "2026-10-03T02:00:00+00:00"
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300), ("c", 1, 200), ("again", 1, 50)):
        ledger_writing.write(entry(name, rank, pending=pending, created=october, recorded_at=october), root)
    ledger_compaction.compact(root, now=dt.datetime(2026, 12, 2, tzinfo=dt.UTC))
    ledger_writing.write(entry("again", 0, pending=9), root)  # written again after it was compacted: its file wins
    for name, region in (("d", "eu-west-1"), ("e", None)):
        ledger_writing.write(entry(name, 1, region=region, task_id="evaluate"), root)
    ledger_writing.write({**entry("f", 0), "dag_id": "finance"}, root)
    (root / "nightly" / "truncated.json").write_bytes(b'{"format": 1, "dag_')
    (root / "nightly" / "misplaced.json").write_text(json.dumps(entry("someone-else", 0)))
    (root / "finance" / "of-nightly.json").write_text(json.dumps(entry("of-nightly", 0)))
    (root / "nightly" / "compacted" / "2026-09.jsonl").write_bytes(json.dumps(entry("g", 1)).encode() + b"\n{bad\n")
    (root / "nightly" / "notes.txt").write_text("not an entry")


def _upload(s3, local: Path, prefix: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        s3.put_object(
            Bucket="team-bucket", Key=f"{prefix}/{path.relative_to(local).as_posix()}", Body=path.read_bytes()
        )


def _gets(server) -> int:
    """Objects fetched (the emulator counts listings apart, as s3.LIST)."""
    return server.engine.calls["s3.GET"]


@pytest.fixture
def s3_ledger_server(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("ample", buckets={"team-bucket": ()})
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", "s3://team-bucket/sm-prefs/ledger")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_CONN_ID", aws_connection(server, "ledger_store"))
    return server, boto_client(server.endpoint_url, service="s3")


def _seen(reading) -> list[tuple]:
    return sorted((e["dag_id"], e["region"] or "", e["job_name"], e["selected_rank"] or 0) for e in reading.entries)


def test_the_same_ledger_reads_alike_from_a_folder_and_from_a_bucket(s3_ledger_server, tmp_path):
    _, s3 = s3_ledger_server
    local = tmp_path / "ledger"
    _a_varied_ledger(local)
    _upload(s3, local, "sm-prefs/ledger")
    for fields in (None, ledger_entry.REPORT_FIELDS):
        on_disk, on_s3 = ledger_reading.read(local, fields=fields), ledger_reading.read(fields=fields)
        assert _seen(on_s3) == _seen(on_disk) and len(on_s3.entries) == 8
        assert sorted(on_s3.entries, key=lambda e: (e["dag_id"], e["job_name"], e["region"] or "")) == sorted(
            on_disk.entries, key=lambda e: (e["dag_id"], e["job_name"], e["region"] or "")
        )
        assert on_s3.bad == on_disk.bad == 4, (on_s3.bad_examples, on_disk.bad_examples)
    again = next(e for e in ledger_reading.read().entries if e["job_name"] == "again")
    assert again["selected_rank"] == 0, "the job's own object wins over its compacted line"
    for dag in ("nightly", "finance"):  # one DAG's folder alone, as finish_by reads it at task time
        assert _seen(ledger_reading.read(dag_id=dag)) == _seen(ledger_reading.read(local, dag_id=dag))
    assert _seen(ledger_reading.read(dags={"finance"})) == [("finance", "us-east-1", "f", 0)]


def test_a_reading_with_a_memo_fetches_only_what_changed_since(s3_ledger_server):
    server, s3 = s3_ledger_server
    for name in ("a", "b", "c"):
        ledger_writing.write(entry(name, 1))
    memo = reading_memo.ReadingMemo()
    before = _gets(server)
    first = ledger_reading.read(fields=ledger_entry.REPORT_FIELDS, memo=memo)
    assert _gets(server) - before == 3 and len(first.entries) == 3
    before, listings = _gets(server), server.engine.calls["s3.LIST"]
    assert ledger_reading.read(fields=ledger_entry.REPORT_FIELDS, memo=memo).signature == first.signature
    assert _gets(server) == before, "nothing changed: nothing fetched"
    assert server.engine.calls["s3.LIST"] == listings + 1, "one listing: the store says what is current"
    ledger_writing.write(entry("d", 0))  # one more job ended
    ledger_writing.write(entry("b", 0, pending=5))  # and one was written again (a retry's record): a new ETag
    s3.delete_object(Bucket="team-bucket", Key="sm-prefs/ledger/nightly/c.us-east-1.json")
    before = _gets(server)
    reading = ledger_reading.read(fields=ledger_entry.REPORT_FIELDS, memo=memo)
    assert _gets(server) - before == 2, "only the new and the replaced objects"
    assert sorted((e["job_name"], e["selected_rank"]) for e in reading.entries) == [("a", 1), ("b", 0), ("d", 0)]
    assert reading.signature != first.signature
    assert set(memo.objects(str(ledger.location()), ledger_entry.REPORT_FIELDS)) == {
        f"nightly/{name}.us-east-1.json" for name in "abd"
    }, "what was removed is no longer held"


def test_an_object_larger_than_an_entry_is_refused_from_its_listing_without_a_get(s3_ledger_server):
    server, s3 = s3_ledger_server
    ledger_writing.write(entry("a", 1))
    s3.put_object(
        Bucket="team-bucket", Key="sm-prefs/ledger/nightly/huge.json", Body=b" " * (ledger.MAX_ENTRY_BYTES + 1)
    )
    before = _gets(server)
    reading = ledger_reading.read()
    assert _gets(server) - before == 1 and reading.bad == 1
    assert f"huge.json: {ledger.MAX_ENTRY_BYTES + 1} bytes, more than the" in reading.bad_examples[0]


def _report_json(env=None) -> list[dict]:
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_second_report_fetches_only_the_objects_changed_since_the_first(s3_ledger_server, tmp_path, monkeypatch):
    """The CLI keeps what it read in a cache folder on its host; the store's listing decides what is current."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    server, s3 = s3_ledger_server
    for name, rank in (("a", 0), ("b", 1), ("c", 1)):
        ledger_writing.write(entry(name, rank))
    before = _gets(server)
    first = _report_json()
    assert _gets(server) - before == 3 and first[0]["runs"] == 3
    (cached,) = (tmp_path / "home" / "sm_prefs" / "cache").glob("ledger-*.json")
    written = cached.stat().st_mtime_ns
    before = _gets(server)
    assert _report_json() == first and _gets(server) == before, "nothing changed: nothing fetched"
    assert cached.stat().st_mtime_ns == written, "nor written again"
    # The rows of the same question over the same listing are kept too: served, not computed again.
    (rows,) = (tmp_path / "home" / "sm_prefs" / "cache").glob("report-*.json")
    assert json.loads(rows.read_text().partition("\n")[2])["rows"] == first
    # What this code did not write is never served: rows edited by hand, or a forged file of its own.
    digest, _, body = rows.read_text().partition("\n")
    rows.write_text(f"{digest}\n" + body.replace('"runs": 3', '"runs": 99'))
    assert _report_json() == first
    rows.write_text(json.dumps([{"dag_id": "forged", "runs": 999}]))
    assert _report_json() == first
    rows.unlink()
    # Another host writes a job again in place: its ETag changes, so the cache's copy is not used.
    s3.put_object(
        Bucket="team-bucket", Key="sm-prefs/ledger/nightly/a.us-east-1.json", Body=json.dumps(entry("a", 1)).encode()
    )
    before = _gets(server)
    changed = _report_json()
    assert _gets(server) - before == 1 and changed != first
    # A cache is a saving, never a figure: rows poisoned at the listed ETags, a damaged file, one of another
    # shape, a FIFO (never opened: it would block the read) are each a slower run, never a different report.
    digest, _, body = cached.read_text().partition("\n")
    poisoned = body.replace('"completed"', '"no_capacity"')
    assert poisoned != body
    for damaged in (f"{digest}\n{poisoned}", "{ not json", f"{digest}\n" + json.dumps({"objects": []})):
        cached.write_text(damaged)
        before = _gets(server)
        assert _report_json() == changed and _gets(server) - before == 3, damaged[:80]
    cached.unlink()
    os.mkfifo(cached)
    assert _report_json() == changed
    cached.unlink()
    assert _report_json() == changed


OCTOBER = "2026-10-03T02:00:00+00:00"
AFTER_OCTOBER = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def _old(name: str, rank: int = 1, **extra) -> dict:
    return entry(name, rank, created=OCTOBER, recorded_at=OCTOBER, **extra)


def test_compaction_keeps_an_entry_written_again_while_it_folds(s3_ledger_server, monkeypatch):
    """A retry's record lands between the fold's read of a job and its delete: the delete is conditional on the
    version folded, so the newer entry stays in its own object and wins over its compacted line."""
    from airflow_sm_prefs.storage import object_listing

    _, s3 = s3_ledger_server
    for name in ("a", "b", "c"):
        ledger_writing.write(_old(name))
    fetch = object_listing.fetch_many

    def a_retry_lands_meanwhile(root, keys):
        bodies = fetch(root, keys)
        ledger_writing.write(_old("b", 0, pending=5))
        return bodies

    monkeypatch.setattr(object_listing, "fetch_many", a_retry_lands_meanwhile)
    result = ledger_compaction.compact(now=AFTER_OCTOBER)
    assert (result.folded, result.kept, result.files) == (2, 1, 1)
    assert _keys(s3) == ["sm-prefs/ledger/nightly/b.us-east-1.json", "sm-prefs/ledger/nightly/compacted/2026-10.jsonl"]
    monkeypatch.setattr(object_listing, "fetch_many", fetch)
    b = next(e for e in ledger_reading.read().entries if e["job_name"] == "b")
    assert (b["selected_rank"], b["pending_seconds"]) == (0, 5), "the newer entry, not the folded one"
    again = ledger_compaction.compact(now=AFTER_OCTOBER)
    assert (again.folded, again.kept) == (1, 0) and len(ledger_reading.read().entries) == 3


def test_a_month_another_compaction_replaced_meanwhile_is_merged_again(s3_ledger_server, monkeypatch):
    from airflow_sm_prefs.storage import object_storage

    _, s3 = s3_ledger_server
    ledger_writing.write(_old("a"))
    month = "sm-prefs/ledger/nightly/compacted/2026-10.jsonl"
    write = object_storage.write_if_unchanged
    raced = []

    def another_writer_first(path, data, version):
        if not raced:  # the first attempt meets a month object someone else wrote since it was read
            raced.append(1)
            s3.put_object(Bucket="team-bucket", Key=month, Body=json.dumps(_old("z")).encode() + b"\n")
        return write(path, data, version)

    monkeypatch.setattr(object_storage, "write_if_unchanged", another_writer_first)
    assert ledger_compaction.compact(now=AFTER_OCTOBER).folded == 1
    lines = s3.get_object(Bucket="team-bucket", Key=month)["Body"].read().splitlines()
    assert sorted(json.loads(line)["job_name"] for line in lines) == ["a", "z"], "neither line lost"


def test_one_compaction_at_a_time_across_hosts(s3_ledger_server, monkeypatch):
    _, s3 = s3_ledger_server
    ledger_writing.write(_old("a"))
    lease = "sm-prefs/ledger/.compaction-lease"
    held = {"holder": "host-b:42", "until": "2999-01-01T00:00:00+00:00"}
    s3.put_object(Bucket="team-bucket", Key=lease, Body=json.dumps(held).encode())
    result = ledger_compaction.compact(now=AFTER_OCTOBER)
    assert result.folded == 0 and result.busy == "host-b:42 until 2999-01-01T00:00:00+00:00"
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "ledger", "compact"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and "host-b:42 until 2999-01-01" in done.stderr and "lease" in done.stderr
    # A lease its holder never gave back lapses; the next compaction takes it, folds, and gives it back.
    lapsed = {**held, "until": "2020-01-01T00:00:00+00:00"}
    s3.put_object(Bucket="team-bucket", Key=lease, Body=json.dumps(lapsed).encode())
    taken = []
    fold = ledger_compaction._compact_listed

    def look_at_the_lease(root, cutoff):
        taken.append(json.loads(s3.get_object(Bucket="team-bucket", Key=lease)["Body"].read()))
        return fold(root, cutoff)

    monkeypatch.setattr(ledger_compaction, "_compact_listed", look_at_the_lease)
    started = dt.datetime.now(dt.UTC)
    assert ledger_compaction.compact(now=AFTER_OCTOBER).folded == 1
    (mine,) = taken
    lapses_in = dt.datetime.fromisoformat(mine["until"]) - started
    assert dt.timedelta(minutes=14) < lapses_in <= dt.timedelta(minutes=15), "a crashed holder blocks 15 minutes"
    assert mine["holder"] != held["holder"]
    assert _keys(s3) == ["sm-prefs/ledger/nightly/compacted/2026-10.jsonl"], "the lease given back"
    assert [e["job_name"] for e in ledger_reading.read().entries] == ["a"], "the lease object is no entry"


def test_a_report_past_the_threshold_folds_the_ledger_for_every_later_reading(s3_ledger_server, tmp_path, monkeypatch):
    """Nobody runs `ledger compact`: the report that finds more old job objects than
    [sm_prefs] ledger_compact_after folds them, and says so on stderr; what it reports is unchanged."""
    server, s3 = s3_ledger_server
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    for name in ("a", "b", "c"):
        ledger_writing.write(_old(name))
    first = _report_json()
    assert len(_keys(s3)) == 3, "objects written now are not old: nothing folded"
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "3")
    # The objects' age is the store's: here they were written in October, as their entries say.
    stored = server.emulator.s3._backend().buckets["team-bucket"].keys
    for name in ("a", "b", "c"):
        stored[f"sm-prefs/ledger/nightly/{name}.us-east-1.json"].last_modified = dt.datetime(2026, 10, 3, 2)
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == first
    assert "folded 3 old ledger entries into 1 month object(s)" in done.stderr
    assert _keys(s3) == ["sm-prefs/ledger/nightly/compacted/2026-10.jsonl"]
    before = _gets(server)
    assert _report_json() == first and _gets(server) - before == 1, "one month object fetched, not three jobs"


def test_the_capacity_page_folds_the_ledger_in_a_thread_of_its_own(s3_ledger_server, monkeypatch):
    from airflow_sm_prefs.surface import capacity_views

    server, s3 = s3_ledger_server
    for name in ("a", "b", "c"):
        ledger_writing.write(_old(name))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "3")
    stored = server.emulator.s3._backend().buckets["team-bucket"].keys
    for index in range(3):  # old objects that are no entries are nothing to fold
        s3.put_object(Bucket="team-bucket", Key=f"sm-prefs/ledger/nightly/notes-{index}.txt", Body=b"notes")
        stored[f"sm-prefs/ledger/nightly/notes-{index}.txt"].last_modified = dt.datetime(2026, 10, 3, 2)
    views = capacity_views.Views()
    assert len(views.reading({"nightly"}).entries) == 3
    assert views._compacting is None, "objects the store wrote today are not old"
    for name in ("a", "b", "c"):
        stored[f"sm-prefs/ledger/nightly/{name}.us-east-1.json"].last_modified = dt.datetime(2026, 10, 3, 2)
    assert len(views.reading({"nightly"}).entries) == 3, "the page is answered from what was read"
    folded = views._compacting.result(timeout=60)
    assert (folded.folded, folded.files) == (3, 1)
    assert _keys(s3) == ["sm-prefs/ledger/nightly/compacted/2026-10.jsonl"] + [
        f"sm-prefs/ledger/nightly/notes-{index}.txt" for index in range(3)
    ]
    assert sorted(e["job_name"] for e in views.reading({"nightly"}).entries) == ["a", "b", "c"]


def test_a_fold_the_store_denies_is_said_in_the_api_servers_log_and_the_page_stands(
    s3_ledger_server, monkeypatch, caplog
):
    """The page folds in a thread nobody waits on: a store that denies the deletes is one warning in the API
    server's log, named like the CLI's line, and the page's reading is whole."""
    import logging

    from airflow_sm_prefs.surface import capacity_views
    from sm_prefs_devkit.local_stack import control

    server, _ = s3_ledger_server
    for name in ("a", "b", "c"):
        ledger_writing.write(_old(name))
    stored = server.emulator.s3._backend().buckets["team-bucket"].keys
    for name in ("a", "b", "c"):
        stored[f"sm-prefs/ledger/nightly/{name}.us-east-1.json"].last_modified = dt.datetime(2026, 10, 3, 2)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "1")
    control(server.endpoint_url, "faults", {"deny": ["DeleteObject", "DeleteObjects"]})
    views = capacity_views.Views()
    with caplog.at_level(logging.WARNING, logger=capacity_views.__name__):
        assert len(views.reading({"nightly"}).entries) == 3
        fold = views._compacting.result(timeout=60)
    assert fold is not None and fold.refused is not None and fold.folded == 0
    (said,) = [r.getMessage() for r in caplog.records if r.name == capacity_views.__name__]
    assert said.startswith("Could not fold the capacity ledger's old entries: ") and "refused access" in said, said
    assert len(views.reading({"nightly"}).entries) == 3


def test_a_fold_the_store_refuses_costs_the_fold_not_the_report(s3_ledger_server, tmp_path, monkeypatch, capsys):
    """A team's role that may not delete other DAGs' objects: the report is printed, the fold is a warning."""
    from airflow_sm_prefs.surface import cli

    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    ledger_writing.write(_old("a"))
    stored = s3_ledger_server[0].emulator.s3._backend().buckets["team-bucket"].keys
    stored["sm-prefs/ledger/nightly/a.us-east-1.json"].last_modified = dt.datetime(2026, 10, 3, 2)  # due a fold

    def refused(root, reading):
        raise PermissionError("Access Denied")

    monkeypatch.setattr(ledger_compaction, "compact_if_due", refused)
    assert cli.main(["report", "--format", "json"]) == 0
    said = capsys.readouterr()
    printed = said.out[said.out.index("[\n") :]  # after what Airflow's own loggers print in this process
    assert json.loads(printed)[0]["runs"] == 1
    folded = "airflow-sm-prefs: warning: could not fold the ledger's old entries: the shared store ([sm_prefs] "
    assert folded in said.err, "the line names the store by its setting"
    assert "Traceback" not in said.err and len(said.err.strip().splitlines()) == 1


def test_a_fold_the_store_denies_is_one_warning_from_the_installed_command(s3_ledger_server, tmp_path, monkeypatch):
    """The command in a process of its own, against a store whose policy denies DeleteObject and DeleteObjects (a
    team's role): its figures, one warning line for the fold, and nothing more, at the interpreter's exit either
    (a delete still running then printed aiobotocore's "created in a different Context" traceback)."""
    from sm_prefs_devkit.local_stack import control

    server, s3 = s3_ledger_server
    # Several deletes, each refused. The emulator answers them too fast for one to be still in flight at the exit,
    # so the mechanism itself is held by tests/unit/test_object_listing.py; this holds what the user sees.
    names = [f"job-{index}" for index in range(12)]
    for name in names:
        ledger_writing.write(_old(name))
    stored = server.emulator.s3._backend().buckets["team-bucket"].keys
    for name in names:
        stored[f"sm-prefs/ledger/nightly/{name}.us-east-1.json"].last_modified = dt.datetime(2026, 10, 3, 2)
    control(server.endpoint_url, "faults", {"deny": ["DeleteObject", "DeleteObjects"]})
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_COMPACT_AFTER", "1")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    # As a deployment has one: without it Airflow 3.1 warns of its own empty key when it reads the connection.
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", base64.urlsafe_b64encode(b"k" * 32).decode())
    command = [str(Path(sys.executable).with_name("airflow-sm-prefs")), "report", "--format", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["runs"] == len(names)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    (said,) = lines
    assert said.startswith("airflow-sm-prefs: warning: could not fold the ledger's old entries:"), said
    assert "refused access" in said and "s3:DeleteObject" in said, said
    assert {f"sm-prefs/ledger/nightly/{name}.us-east-1.json" for name in names} <= set(_keys(s3)), "nothing deleted"
