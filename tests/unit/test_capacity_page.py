"""The Capacity page's routes: authentication required on every one, rows only for DAGs the user may read."""

from __future__ import annotations

import html
import json

import pytest
from fastapi.testclient import TestClient

from airflow_sm_prefs.evidence import ledger_files, ledger_reading, ledger_writing, reading_memo
from airflow_sm_prefs.surface import capacity_page
from tests.helpers import capacity_app_for
from tests.unit.test_report import entry

ROUTES = (
    "/capacity",
    "/capacity/report",
    "/capacity/weather",
    "/capacity/task-instance?dag_id=nightly&run_id=scheduled__a&task_id=fine_tune",
    "/capacity/plans",
    "/capacity/dags/nightly/task-instance?run_id=scheduled__a&task_id=fine_tune",
)


# A group of plan advice as plan_snapshots keeps it, readable by the "nightly" DAG's readers.
ADVICE_GROUP = {
    "first_choice": "1 x ml.p5.48xlarge",
    "region": "us-east-1",
    "tasks": ["nightly.fine_tune"],
    "task_keys": [["nightly", "fine_tune"]],
    "verdict": "reserve",
    "in_words": "a plan pays if ml.p5.48xlarge stays sold out on more than 5 of 10 nights; ...",
    "evidence_jobs": 10,
    "jobs_per_day": 1.0,
    "sold_out_jobs": 8,
    "sold_out_share": 0.8,
    "sold_out_share_90": [0.541, 0.931],
    "window_days": 7.0,
    "jobs_in_window": 7,
    "options": [],
}


@pytest.fixture
def ledger_with_two_dags(tmp_path, monkeypatch):
    from airflow.sdk import ObjectStoragePath

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    for name, rank, pending in (("a", 0, 7200), ("b", 1, 300), ("c", 1, 200)):
        ledger_writing.write(entry(name, rank, pending=pending), root)
    ledger_writing.write({**entry("secret", 1), "dag_id": "finance_forecast"}, root)  # type: ignore[typeddict-unknown-key]


@pytest.fixture
def signed_in(monkeypatch):
    """A user the auth manager lets read the nightly DAG only."""
    monkeypatch.setattr(capacity_page, "readable_dags", lambda user: {"nightly"})
    return TestClient(capacity_app_for({"nightly"}))


def test_every_route_is_behind_airflows_own_access_check():
    """Each route depends on ``requires_access_dag`` (the listing rule, or one DAG's task instances named in the
    path); the one that does not only sends old links on to one that does."""
    app = capacity_page.create_app()
    access = app.state.dag_access
    assert access.listing.__qualname__ == access.task_instances.__qualname__ == "requires_access_dag.<locals>.inner"
    checked = {}
    for route in app.routes:
        calls = {dependency.call for dependency in route.dependant.dependencies}
        checked[route.path] = (access.listing in calls, access.task_instances in calls)
    assert checked == {
        "/capacity": (True, False),
        "/capacity/weather": (True, False),
        "/capacity/plans": (True, False),
        "/capacity/report": (True, False),
        "/capacity/task-instance": (False, False),  # a redirect: see below
        "/capacity/dags/{dag_id}/task-instance": (False, True),
    }


def test_an_old_task_instance_link_is_sent_to_the_checked_route(signed_in):
    sent = signed_in.get(ROUTES[3], follow_redirects=False)
    assert sent.status_code == 307
    assert sent.headers["location"] == "dags/nightly/task-instance?run_id=scheduled__a&task_id=fine_tune&map_index=-1"
    odd = signed_in.get("/capacity/task-instance?dag_id=a/b&run_id=r&task_id=t", follow_redirects=False)
    assert odd.headers["location"].startswith("dags/a%2Fb/task-instance?"), "a DAG id stays one path segment"


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_refuses_a_caller_without_a_session(route, ledger_with_two_dags):
    response = TestClient(capacity_page.create_app()).get(route)
    assert response.status_code == 401


def test_the_page_shows_the_readable_dags_rows_and_charts(ledger_with_two_dags, signed_in):
    page = signed_in.get("/capacity")
    assert page.status_code == 200
    assert "nightly / fine_tune" in page.text and "paid_off" in page.text
    assert "finance_forecast" not in page.text, "a DAG the user may not read shows no row"
    assert page.text.count("<svg") == 3, "a wait chart, the first choice's wait survival, a run-time chart"
    assert "href='capacity/weather'" in page.text
    weather = signed_in.get("/capacity/weather").text
    assert weather.count("aria-label='capacity weather'") == 2, "a heatmap per configuration the readable DAGs listed"
    # 2026-11-29 02:00 UTC, a Sunday: a waited 2 h for p5; b and c got p4d at once (saying nothing of p5), and
    # a's two hours say p4d was busy for it.
    assert "Sun 02:00 UTC: 0% of 1 job within 15 minutes, median wait 2h00m00s" in weather
    assert "Sun 02:00 UTC: 67% of 3 jobs within 15 minutes" in weather and "Mon 02:00" not in weather
    assert "aria-label='first-choice wait survival'" in page.text and "break-even 3m20s" in page.text


def test_the_report_route_is_filtered_too(ledger_with_two_dags, signed_in):
    rows = signed_in.get("/capacity/report").json()
    assert [(r["dag_id"], r["runs"], r["verdict"]) for r in rows] == [("nightly", 3, "paid_off")]


def test_the_report_route_answers_its_declared_shape_and_drops_nothing_the_report_computed(
    ledger_with_two_dags, signed_in
):
    from airflow_sm_prefs.analysis import report
    from airflow_sm_prefs.surface.capacity_models import ConfigurationRow, FirstChoiceWaitJson, ReportRow

    (row,) = signed_in.get("/capacity/report").json()
    assert set(row) == set(ReportRow.__annotations__)
    assert set(row["first_choice_wait"] or {}) == set(FirstChoiceWaitJson.__annotations__)
    assert row["configurations"] and all(set(c) == set(ConfigurationRow.__annotations__) for c in row["configurations"])
    computed = report.summarize(ledger_reading.read(dag_id="nightly").entries)
    assert [row] == json.loads(json.dumps(computed)), "the model neither drops nor changes a figure"
    app = capacity_page.create_app()
    (route,) = [r for r in app.routes if getattr(r, "path", None) == "/capacity/report"]
    assert route.response_model == list[ReportRow]  # type: ignore[attr-defined]


def test_a_task_instance_view_compares_it_with_its_history(ledger_with_two_dags, signed_in):
    page = signed_in.get(ROUTES[3])
    assert page.status_code == 200
    assert "the longest of this task's 3 jobs" in html.unescape(page.text) and "(chosen)" in page.text
    assert "<h2>Advice</h2>" in page.text and "the first choice alone" in page.text
    forbidden = signed_in.get("/capacity/task-instance?dag_id=finance_forecast&run_id=r&task_id=fine_tune")
    assert forbidden.status_code == 403


def test_text_from_the_ledger_is_escaped(tmp_path, monkeypatch, signed_in):
    from airflow.sdk import ObjectStoragePath

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    for name in "abc":
        ledger_writing.write({**entry(name, 1), "task_id": "<script>alert(1)</script>"}, root)  # type: ignore[typeddict-unknown-key]
    page = signed_in.get("/capacity")
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text


def test_unreadable_entries_are_counted_on_the_page_not_a_crash(ledger_with_two_dags, signed_in, tmp_path):
    (tmp_path / "ledger" / "nightly" / "torn.json").write_text('{"format": 1, "dag_id": "nigh')
    page = signed_in.get("/capacity")
    assert page.status_code == 200 and "1 ledger entries could not be read" in page.text
    assert "nightly / fine_tune" in page.text


def test_costs_and_benchmarks_are_charted_when_known(tmp_path, monkeypatch, signed_in):
    from airflow.sdk import ObjectStoragePath

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    for name, rank in (("a", 0), ("b", 1), ("c", 1)):
        ledger_writing.write(entry(name, rank, estimated_cost_usd=12.5, certified_run_seconds=2000.0), root)
    page = signed_in.get("/capacity").text
    assert page.count("<svg") == 4, "wait, the first choice's wait survival, run time and cost"
    assert "$12.50 (2 jobs)" in page and "x1.80 its benchmark - DRIFTED" in page


def test_a_page_asked_again_is_not_computed_again_until_a_ledger_file_changes(
    ledger_with_two_dags, signed_in, tmp_path, monkeypatch
):
    """The API server keeps each view while the ledger's files are as they were: a job that ends, a file
    edited in place or one removed is seen at the next request, and only the folder that changed is read."""
    from airflow.sdk import ObjectStoragePath

    computed = []
    summarize = capacity_page.report.summarize
    monkeypatch.setattr(capacity_page.report, "summarize", lambda *a, **k: computed.append(1) or summarize(*a, **k))
    read_folders = []
    read_folder = ledger_files.read_folder
    monkeypatch.setattr(
        reading_memo, "read_folder", lambda folder, *a: read_folders.append(folder.name) or read_folder(folder, *a)
    )
    monkeypatch.setattr(capacity_page, "readable_dags", lambda user: {"nightly", "finance_forecast"})

    first = signed_in.get("/capacity").text
    assert signed_in.get("/capacity").text == first
    assert len(computed) == 1 and sorted(read_folders) == ["finance_forecast", "nightly"]

    root = ObjectStoragePath(f"file://{tmp_path}/ledger")
    ledger_writing.write(entry("d", 0, pending=60), root)  # a job of the nightly DAG ends
    assert "<td>4</td>" in signed_in.get("/capacity").text, "the new job is counted at the next request"
    assert len(computed) == 2 and sorted(read_folders) == ["finance_forecast", "nightly", "nightly"]

    edited = tmp_path / "ledger" / "nightly" / "d.us-east-1.json"
    edited.write_text(edited.read_text() + " ")
    signed_in.get("/capacity")
    assert len(computed) == 3 and read_folders.count("nightly") == 3, "an edit in place is a change"
    edited.unlink()
    assert signed_in.get("/capacity").text == first, "the removed entry is gone at the next request"
    # The folder is read again, and its files are as at the first request: that page is served again.
    assert len(computed) == 3 and read_folders.count("nightly") == 4


def test_a_reading_memo_never_trusts_a_folder_it_cannot_list_with_times(tmp_path):
    from airflow_sm_prefs.evidence.ledger_files import folder_signature as _folder_signature

    class Remote:
        protocol = "s3"

    assert _folder_signature(Remote()) is None
    (tmp_path / "dag").mkdir()
    (tmp_path / "dag" / "a.json").write_text("{}")
    before = _folder_signature(tmp_path / "dag")
    (tmp_path / "dag" / "a.json").write_text("{} ")
    assert _folder_signature(tmp_path / "dag") != before


@pytest.fixture
def without_s3fs(monkeypatch):
    """A deployment that set an s3:// ledger but did not install the S3 filesystem."""
    import sys

    monkeypatch.setitem(sys.modules, "s3fs", None)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", "s3://team-bucket/sm-prefs/ledger")


@pytest.mark.parametrize("route", ROUTES)
def test_a_ledger_whose_filesystem_is_missing_is_one_sentence_to_a_signed_in_user(route, without_s3fs, signed_in):
    page = signed_in.get(route)
    assert page.status_code == 503
    assert "[sm_prefs] ledger_path = s3://team-bucket/sm-prefs/ledger" in page.text
    assert "pip install &#39;airflow-sm-prefs[s3]&#39;" in page.text and "Traceback" not in page.text


def test_a_missing_filesystem_tells_no_anonymous_caller_about_the_ledger(without_s3fs):
    response = TestClient(capacity_page.create_app()).get("/capacity")
    assert response.status_code == 401 and "ledger" not in response.text


def test_the_plans_view_says_what_is_missing_then_shows_the_advice_and_what_plans_bought(
    ledger_with_two_dags, signed_in, tmp_path, monkeypatch
):
    import datetime as dt

    from airflow_sm_prefs.evidence import plan_snapshots
    from airflow_sm_prefs.sagemaker.training_plans import PlanState

    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", str(tmp_path / "store"))
    page = signed_in.get("/capacity/plans").text
    assert "No advice yet: run <code>airflow-sm-prefs plans advise</code>" in page
    assert "The account's plans have not been listed yet" in page
    now = dt.datetime.now(dt.UTC)
    group = {
        **ADVICE_GROUP,
        "tasks": ["nightly.fine_tune", "finance_forecast.train", "nightly.<script>alert(1)</script>"],
        "task_keys": [
            ["nightly", "fine_tune"],
            ["finance_forecast", "train"],
            ["nightly", "<script>alert(1)</script>"],
        ],
        "options": [
            {
                "option": "reserve tpo-1",
                "time_to_result_p50_seconds": 3600.0,
                "time_to_result_p90_seconds": None,
                "expected_cost_usd": 910.0,
            },
        ],
    }
    secret = {
        **group,
        "tasks": ["finance_forecast.train"],
        "task_keys": [["finance_forecast", "train"]],
        "first_choice": "8 x ml.trn1.32xlarge",
    }
    # DAG ids that a prefix filter on "dag.task" would take for the readable "nightly": a dotted extension, a
    # shorter and a longer id; and a group an older version kept without its pairs.
    lookalikes = {
        **group,
        "tasks": ["nightly.secret.train", "nightl.y", "xnightly.train"],
        "task_keys": [["nightly.secret", "train"], ["nightl", "y"], ["xnightly", "train"]],
        "first_choice": "4 x ml.g6.48xlarge",
    }
    unpaired = {**group, "tasks": ["nightly.old"], "first_choice": "2 x ml.g5.48xlarge"}
    unpaired.pop("task_keys")
    plan_snapshots.save_advice([group, secret, lookalikes, unpaired], now)
    idle = PlanState(
        "arn:aws:sagemaker:us-east-1:1:training-plan/spare",
        "spare",
        "Active",
        "ml.p5.48xlarge",
        2,
        2,
        0,
        now - dt.timedelta(hours=10),
        now + dt.timedelta(days=1),
        500.0,
        "USD",
    )
    plan_snapshots.save_plans([idle], "us-east-1", now)
    page = signed_in.get("/capacity/plans").text
    assert "1 x ml.p5.48xlarge in us-east-1: reserve" in page and "$910.00" in page and "1h00m00s" in page
    assert "8 x ml.trn1.32xlarge" not in page and "finance_forecast" not in page, "only the readable DAGs' tasks"
    assert "ml.g6.48xlarge" not in page and "nightly.secret" not in page and "xnightly" not in page
    assert "ml.g5.48xlarge" not in page and "nightly.old" not in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "spare sat idle: none of the 20 instance-hours it has held so far was used by a job" in page


@pytest.mark.parametrize("given", ["{MAP_INDEX}", "-1", ""])
def test_the_tab_of_an_unmapped_task_shows_its_view_whatever_the_ui_left_in_the_link(
    given, signed_in, ledger_with_two_dags
):
    """Airflow's UI fills {MAP_INDEX} only on a mapped task's route: an unmapped task's tab keeps it as it is."""
    shown = signed_in.get(
        f"/capacity/dags/nightly/task-instance?run_id=scheduled__a&task_id=fine_tune&map_index={given}"
    )
    assert shown.status_code == 200 and "Job <code>a</code> ended" in shown.text
    sent = signed_in.get(
        f"/capacity/task-instance?dag_id=nightly&run_id=r&task_id=t&map_index={given}", follow_redirects=False
    )
    assert sent.headers["location"].endswith("&map_index=-1")


def test_a_mapped_task_instances_tab_shows_its_own_job_and_its_index(signed_in, tmp_path, monkeypatch):
    from airflow.sdk import ObjectStoragePath

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    where = ObjectStoragePath(f"file://{tmp_path}/ledger")
    for shard in (0, 1):
        ledger_writing.write({**entry(f"shard-{shard}", shard, pending=60), "run_id": "r", "map_index": shard}, where)
    shown = signed_in.get("/capacity/dags/nightly/task-instance?run_id=r&task_id=fine_tune&map_index=1")
    assert shown.status_code == 200 and "<h1>nightly / fine_tune [1]</h1>" in shown.text
    assert "Job <code>shard-1</code> ended" in shown.text and "shard-0</code> ended" not in shown.text
    unmapped = signed_in.get("/capacity/dags/nightly/task-instance?run_id=r&task_id=fine_tune&map_index=-1")
    assert "<h1>nightly / fine_tune</h1>" in unmapped.text and "has no ended SageMaker job" in unmapped.text


def test_a_map_index_that_is_not_one_is_refused_in_one_line(signed_in, ledger_with_two_dags):
    refused = signed_in.get("/capacity/dags/nightly/task-instance?run_id=r&task_id=t&map_index=abc")
    assert refused.status_code == 422
    assert refused.json() == {"detail": "map_index must be -1 (not mapped) or a task's map index, not 'abc'"}


def test_a_jobs_wait_among_its_tasks_reads_true_at_both_ends():
    from airflow_sm_prefs.surface.capacity_page import wait_compared

    assert wait_compared(0, [0, 0, 0, 0]) == "as long as each of this task's 4 jobs"
    assert wait_compared(0, [0, 60, 300, 900]) == "the shortest of this task's 4 jobs"
    assert wait_compared(900, [0, 60, 300, 900]) == "the longest of this task's 4 jobs"
    assert wait_compared(300, [0, 60, 300, 900]) == "longer than 2 of this task's 4 jobs"
    assert wait_compared(60, [60]) == "this task's only job in the ledger"
    assert wait_compared(0, [0, 0, 60, 904]) == "tied for the shortest of this task's 4 jobs"
    assert wait_compared(904, [0, 904, 904]) == "tied for the longest of this task's 3 jobs"


def test_the_tab_finds_a_run_whose_id_airflow_3_1_left_unencoded(signed_in, ledger_with_two_dags, tmp_path):
    """Airflow 3.1's UI puts {RUN_ID} into the link as it is: the '+' of the run id's offset reaches the view as
    a space. 3.2 and later encode it (%2B)."""
    from airflow.sdk import ObjectStoragePath

    run_id = "scheduled__2026-12-06T02:00:00+00:00"
    ledger_writing.write(
        {**entry("d", 1, pending=60), "run_id": run_id}, ObjectStoragePath(f"file://{tmp_path}/ledger")
    )
    for sent in (run_id, run_id.replace("+", "%2B").replace(":", "%3A")):
        shown = signed_in.get(f"/capacity/dags/nightly/task-instance?run_id={sent}&task_id=fine_tune&map_index=-1")
        assert shown.status_code == 200 and "Job <code>d</code> ended" in shown.text, sent


@pytest.mark.parametrize(
    "damage",
    [
        {"sold_out_share": "eighty percent"},
        {"sold_out_share_90": None},
        {"sold_out_share_90": []},
        {"options": "reserve tpo-1"},
        {"options": 7},
        {"sold_out_share": 3.5},
        {"task_keys": [["nightly"]]},
    ],
)
def test_a_kept_advice_this_version_cannot_read_is_left_out_with_a_line(
    damage, ledger_with_two_dags, signed_in, tmp_path, monkeypatch
):
    """Never a 500: each kept group is checked against the shape the page shows."""
    import datetime as dt

    from airflow_sm_prefs.evidence import plan_snapshots

    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", str(tmp_path / "store"))
    good = ADVICE_GROUP
    bad = {**good, "first_choice": "4 x ml.g6.48xlarge", **damage}
    plan_snapshots.save_advice([good, bad], dt.datetime.now(dt.UTC))
    page = signed_in.get("/capacity/plans")
    assert page.status_code == 200
    assert "1 x ml.p5.48xlarge in us-east-1: reserve" in page.text and "ml.g6.48xlarge" not in page.text
    assert "1 group(s) kept in the store could not be read by this version and are\nleft out" in page.text
