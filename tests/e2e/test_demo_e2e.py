"""The `make demo` path, headless: emulator + `airflow standalone`, the nightly pipeline, REST and a real browser.

Screenshots are kept in artifacts/e2e/ as test artifacts. tests/production/test_e2e_on_production.py runs
the same tests on the production topology.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sm_prefs_devkit.demo import (
    CERTIFICATION_DAG,
    NIGHTS,
    OTHER_TEAM_DAG,
    WEATHER_SCENARIO,
    certify,
    later_nights,
    night_record,
    plans_chapter,
    plans_used,
    refresh_prices,
    run_nights,
)
from sm_prefs_devkit.local_stack import LocalStack, control
from tests.browser import launched, signed_in_page
from tests.helpers import listening_addresses

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]

PROJECT = Path(__file__).resolve().parents[2]


def running_demo(kind: type[LocalStack], workdir: Path) -> Iterator[LocalStack]:
    """The body of a module's ``stack`` fixture: the demo's stack of that kind, with the demo's prices."""
    with kind(project_dir=PROJECT, workdir=workdir, scenario=WEATHER_SCENARIO) as stack:
        refresh_prices(stack)
        yield stack


def screenshot_folder(name: str) -> Path:
    folder = PROJECT / "artifacts" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# The docs' screenshots are these tests' shots of the current code, copied when taken: none is kept by hand
# (tests/unit/test_docs_screenshots.py holds the docs to this list).
DOCS_SCREENSHOTS = {
    "fine_tune_xcom.png": "screenshot-xcom.png",
    "capacity_page.png": "screenshot-capacity.png",
    "capacity_plans.png": "screenshot-plans.png",
    "capacity_task_instance.png": "screenshot-task-instance.png",
    "capacity_utilization.png": "screenshot-utilization.png",
}


def shoot(page: Any, folder: Path, name: str) -> None:
    """The page (or one element of it), whole, into ``folder``; and into docs/ when the docs show it."""
    if hasattr(page, "goto"):
        page.screenshot(path=str(folder / name), full_page=True)
    else:
        page.screenshot(path=str(folder / name))
    if name in DOCS_SCREENSHOTS:
        shutil.copyfile(folder / name, PROJECT / "docs" / DOCS_SCREENSHOTS[name])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from running_demo(LocalStack, tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def screenshots() -> Path:
    return screenshot_folder("e2e")


@pytest.fixture(scope="module")
def certification(stack: LocalStack) -> dict:
    """What `make demo` does first: certify the fine-tuning candidates."""
    return certify(stack)


@pytest.fixture(scope="module")
def nights(stack: LocalStack, certification: dict) -> tuple[LocalStack, list[tuple[str, str]]]:
    """What `make demo` runs next: the nightly pipeline on four nights of the weather scenario."""
    return stack, run_nights(stack)


@pytest.fixture(scope="module")
def demo(nights: tuple[LocalStack, list[tuple[str, str]]]) -> tuple[LocalStack, str]:
    """Night 2: the first choice is sold out and the training job falls back to 2 x ml.p4d.24xlarge."""
    stack, runs = nights
    return stack, runs[1][0]


def test_four_nights_of_weather_and_the_verdict_they_earn(nights):
    from airflow_sm_prefs.analysis import report
    from airflow_sm_prefs.evidence import ledger_reading

    stack, runs = nights
    assert [state for _, state in runs] == ["success", "success", "success", "success"]
    trainings = [night_record(stack, run_id, "fine_tune") for run_id, _ in runs]
    assert [t["selected_rank"] for t in trainings] == [0, 1, 1, 0]
    # Night 3: both certified types sold out; the job waited in SageMaker's queue instead of falling back to
    # the uncertified ml.g5.48xlarge, which had room.
    assert trainings[2]["pending_seconds"] > 600 and trainings[1]["pending_seconds"] < 120
    assert all(t["certified_run_seconds"] for t in trainings), "each chosen configuration has a benchmark"
    # The evaluation is sized from what fine_tune got: 8 GPUs (1 x p5) or 16 (2 x p4d) over 4-GPU instances.
    evaluations = [night_record(stack, run_id, "evaluate") for run_id, _ in runs]
    sizes = [(e["selected_instance_type"], e["selected_instance_count"]) for e in evaluations]
    assert sizes == [("ml.g5.12xlarge", 2), ("ml.g5.12xlarge", 4), ("ml.g5.12xlarge", 4), ("ml.g5.12xlarge", 2)]
    rows = {r["task_id"]: r for r in report.summarize(ledger_reading.read(stack.ledger_root).entries)}
    fine_tune = rows["fine_tune"]
    # Nights 2 and 3 fell back while team_b_pretraining's job waited its whole hour for ml.p5.48xlarge: waiting
    # would have taken longer than the fallback's break-even, so it saved time; but 2 x p4d cost more than half
    # as much again per job as 1 x p5 (the scenario's prices), above the 25 % premium allowed.
    assert fine_tune["verdict"] == "did_not_pay_off", fine_tune["reason"]
    assert "the first choice would have taken more than" in fine_tune["reason"]
    first_cost, fallback_cost = (c["estimated_cost_usd_p50"] for c in fine_tune["configurations"])
    assert fallback_cost / first_cost - 1 > 0.5
    assert f"{fallback_cost / first_cost - 1:+.0%} against the first choice's" in fine_tune["reason"]
    assert "premium allowed" in fine_tune["reason"]
    wait = fine_tune["first_choice_wait"]
    assert wait["sources"] == ["nightly_evaluation.fine_tune", "team_b_pretraining.pretrain"]
    assert (wait["basis"], wait["observed"]) == ("same times", 0) and wait["longest_seconds"] > 1800
    other_team = rows["pretrain"]
    assert (other_team["runs"], other_team["no_capacity"], other_team["rank_counts"]) == (4, 2, {"#1": 2})
    assert fine_tune["failed_after_start"] == 0 and fine_tune["rank_counts"] == {"#1": 2, "#2": 2}
    assert all(c["run_time_vs_certified_p50"] is not None for c in fine_tune["configurations"])
    assert rows["prepare_data"]["verdict"] == "not_enough_data" and rows["prepare_data"]["fallback_rate"] == 0.0


def test_advice_and_weather_answer_on_the_demos_ledger(nights):
    from airflow_sm_prefs.analysis import advisor, weather
    from airflow_sm_prefs.analysis.counterfactual import Timeline
    from airflow_sm_prefs.evidence import ledger_reading

    stack, _ = nights
    entries = ledger_reading.read(stack.ledger_root).entries
    history = [e for e in entries if e["task_id"] == "fine_tune"]
    advice = {row["candidate"]: row for row in advisor.advise(history, Timeline(entries))["candidates"]}
    assert advice["the current list"]["nights_with_a_result"] == 4
    # Alone, ml.p5.48xlarge was never seen free on nights 2 and 3: those nights wait past the evidence.
    assert advice["the first choice alone"]["nights_waiting_past_the_evidence"] == 2
    forecast = {(r["instance_type"], r["instance_count"]): r for r in weather.weather(entries)}
    assert forecast[("ml.p5.48xlarge", 1)]["jobs"] >= 4


def test_certification_keeps_the_candidates_that_passed_and_the_nightly_dag_lists_only_those(stack, certification):
    from airflow_sm_prefs.preflight import certification as registry

    verdicts = certification["candidates"]
    assert [label for label, v in verdicts.items() if v["passed"]] == ["1 x ml.p5.48xlarge", "2 x ml.p4d.24xlarge"]
    assert "CUDA error" in verdicts["4 x ml.g5.48xlarge"]["reason"], what_the_task_did(stack, "run_g5_48xlarge_x4")
    assert str(certification["registry"]).endswith("certified.yaml")
    written = registry.read(stack.shared_copy("certified.yaml"))["nightly-fine-tune"]
    assert sorted(c.key for c in written) == [("ml.p4d.24xlarge", 2), ("ml.p5.48xlarge", 1)]
    # The image the jobs ran (the DAG's config holds a template for it).
    assert {c.image_uri for c in written} == {"123456789012.dkr.ecr.us-east-1.amazonaws.com/llm-eval:2026.11"}


def what_the_task_did(stack: LocalStack, task_id: str) -> str:
    """A certification task's state, its log's events and the emulator's jobs of it: why its record is missing."""
    (run,) = stack.get(f"/api/v2/dags/{CERTIFICATION_DAG}/dagRuns?limit=1&order_by=-run_after")["dag_runs"]
    (ti,) = [t for t in stack.task_instances(CERTIFICATION_DAG, run["dag_run_id"]) if t["task_id"] == task_id]
    jobs = [(job["name"], job["status"]) for job in stack.jobs() if "g5-48xlarge" in job["name"]]
    messages = stack.try_messages(CERTIFICATION_DAG, run["dag_run_id"], task_id, ti["try_number"])
    return f"{task_id} ended {ti['state']}; its jobs {jobs}; its log's end:\n" + "\n".join(messages[-40:])


def test_pipeline_falls_back_and_records_the_choice(demo):
    stack, run_id = demo
    training = stack.xcom(stack.dag_id, run_id, "fine_tune")
    assert (training["status"], training["selected_rank"], training["fell_back"]) == ("Completed", 1, True)
    assert (training["selected_instance_type"], training["selected_instance_count"]) == ("ml.p4d.24xlarge", 2)
    # Priced from the emulated Price List API (the scenario's $40 per p4d instance-hour), per billed second.
    assert training["cost_basis"] == "on-demand"
    assert training["estimated_cost_usd"] == round(training["billable_seconds"] * 2 * 40 / 3600, 4)
    # Read from the emulator's CloudWatch once the job ended: the scenario's 91 % per p4d GPU, give or take 4.
    assert 87 <= training["utilization"]["gpu"]["mean"] <= 95, training["utilization"]
    preparation = stack.xcom(stack.dag_id, run_id, "prepare_data")
    assert (preparation["job_kind"], preparation["selected_rank"]) == ("processing", 0)
    links = stack.task_links(stack.dag_id, run_id, "fine_tune")
    assert links["SageMaker job"] == (
        f"https://console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/{training['job_name']}"
    )
    assert training["job_name"] in links["CloudWatch logs"]
    summaries = list(stack.workdir.glob("nightly_evaluation_*.json"))
    assert summaries, "the downstream task wrote its run summary"


def test_both_jobs_are_in_the_capacity_ledger_and_its_report(demo):
    from airflow_sm_prefs.evidence import ledger_reading
    from sm_prefs_devkit.demo import capacity_report

    stack, run_id = demo
    entries = {e["task_id"]: e for e in ledger_reading.read(stack.ledger_root).entries if e["run_id"] == run_id}
    assert set(entries) == {"prepare_data", "fine_tune", "evaluate"}
    assert (entries["fine_tune"]["outcome"], entries["fine_tune"]["selected_rank"]) == ("completed", 1)
    table = capacity_report(stack)
    assert "nightly_evaluation / fine_tune" in table and "its certified" in table


def test_jobs_read_and_write_s3_so_downstream_tasks_read_their_output(demo):
    """The processing job read the landed raw data and wrote shards, which the training job read; a plain
    Airflow task then opened the model through the amazon provider's S3Hook on the same endpoint."""
    stack, run_id = demo
    training = stack.xcom(stack.dag_id, run_id, "fine_tune")
    model = stack.xcom(stack.dag_id, run_id, "inspect_model")
    assert model["model_artifact"] == f"s3://sm-prefs-demo/models/{training['job_name']}/output/model.tar.gz"
    assert model["files"] == ["model.json"] and model["bytes"] > 0


def test_credentials_never_reach_logs(demo):
    stack, _ = demo
    task_logs = [path for folder in stack.log_folders() for path in folder.rglob("attempt=*.log")]
    # Both SageMaker tasks and the summary task wrote a log: the check below read real task output.
    assert {p.parent.name for p in task_logs} >= {f"task_id={task}" for task in ("prepare_data", "fine_tune")}
    assert any("SageMaker selected" in p.read_text(errors="replace") for p in task_logs)
    component_logs = list(stack.workdir.glob("*.log"))  # airflow.log (standalone) or one per component
    assert "emulator.log" in {p.name for p in component_logs} and len(component_logs) >= 2
    for path in [*task_logs, *component_logs]:
        assert stack.secret_key not in path.read_text(errors="replace"), path


def test_the_demo_listens_on_loopback_only_with_a_generated_password(demo):
    stack, _ = demo
    for port in (stack.api_port, stack.emulator_port):
        assert listening_addresses(port) == {"127.0.0.1"}, f"port {port} must listen on 127.0.0.1 only"
    password = stack.admin_password()
    assert len(password) >= 12 and password != "admin"
    assert not any("PASSWORD" in key or "ALL_ADMINS" in key for key in stack.airflow_env())


def test_ui_shows_the_chosen_configuration_and_the_sagemaker_link(demo, screenshots):
    from playwright.sync_api import sync_playwright

    stack, run_id = demo
    task_page = f"{stack.api_url}/dags/{stack.dag_id}/runs/{urllib.parse.quote(run_id)}/tasks/fine_tune"
    with sync_playwright() as playwright:
        browser = launched(playwright)
        try:
            page = signed_in_page(browser, stack.api_url, stack.admin_password(), height=1000)
            page.goto(task_page)
            page.get_by_text("Storage", exact=True).click()
            page.get_by_text("XCom", exact=True).click()
            page.get_by_role("button", name="Expand all extra JSON").click()
            page.get_by_text("ml.p4d.24xlarge").first.wait_for(timeout=30_000)
            page.get_by_text("selected_rank").first.wait_for(timeout=10_000)
            shoot(page, screenshots, "fine_tune_xcom.png")

            page.goto(task_page + "/details")
            link = page.get_by_role("link", name="SageMaker job")
            link.wait_for(timeout=30_000)
            assert "/sagemaker/home?region=us-east-1#/jobs/" in (link.get_attribute("href") or "")
            shoot(page, screenshots, "fine_tune_links.png")
        finally:
            browser.close()


def test_every_capacity_route_refuses_an_unauthenticated_request(demo):
    stack, run_id = demo
    for route in (
        "/sm-prefs/capacity",
        "/sm-prefs/capacity/report",
        "/sm-prefs/capacity/weather",
        "/sm-prefs/capacity/plans",
        f"/sm-prefs/capacity/task-instance?dag_id={stack.dag_id}&run_id={urllib.parse.quote(run_id)}&task_id=fine_tune",
        f"/sm-prefs/capacity/dags/{stack.dag_id}/task-instance?run_id={urllib.parse.quote(run_id)}&task_id=fine_tune",
    ):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(stack.api_url + route, timeout=30)
        assert refused.value.code == 401, route


def test_the_capacity_page_in_the_airflow_ui(demo, screenshots):
    """Signed in, the navigation's Capacity page shows the task's row and its charts, and a task instance
    shows its own capacity view; the figures are the ledger's."""
    from playwright.sync_api import sync_playwright

    from airflow_sm_prefs.analysis import report
    from airflow_sm_prefs.evidence import ledger_reading

    stack, run_id = demo
    (row,) = [
        r for r in report.summarize(ledger_reading.read(stack.ledger_root).entries) if r["task_id"] == "fine_tune"
    ]
    with sync_playwright() as playwright:
        browser = launched(playwright)
        try:
            page = signed_in_page(browser, stack.api_url, stack.admin_password(), height=1100)
            page.goto(stack.api_url + "/plugin/sm-prefs-capacity")
            frame = page.frame_locator("iframe")
            frame.get_by_role("cell", name="nightly_evaluation / fine_tune").wait_for(timeout=30_000)
            frame.get_by_text(row["verdict"]).first.wait_for(timeout=10_000)
            assert frame.locator("svg").count() >= 3
            frame.get_by_text("Median estimated cost per job").first.wait_for(timeout=10_000)
            frame.get_by_text("would still have kept waiting").first.wait_for(timeout=10_000)  # the survival chart
            frame.get_by_text("GPU utilization per configuration").first.wait_for(timeout=10_000)
            frame.get_by_text(row["summary"]).first.wait_for(timeout=10_000)  # what happened, before the verdict
            shoot(page, screenshots, "capacity_page.png")
            survival = frame.locator("figure", has=frame.locator("svg[aria-label='first-choice wait survival']"))
            survival.first.scroll_into_view_if_needed()
            survival.first.screenshot(path=str(screenshots / "capacity_first_choice_wait.png"))
            # The fine-tuning step's two configurations, each with its GPUs' utilization (the second such chart).
            gpus = frame.locator("figure", has=frame.get_by_text("GPU utilization per configuration")).nth(1)
            gpus.scroll_into_view_if_needed()
            assert "2 x ml.p4d.24xlarge" in gpus.inner_text() and "1 x ml.p5.48xlarge" in gpus.inner_text()
            shoot(gpus, screenshots, "capacity_utilization.png")

            page.goto(f"{stack.api_url}/sm-prefs/capacity/weather")
            page.locator("svg[aria-label='capacity weather']").first.wait_for(timeout=30_000)
            assert page.locator("svg[aria-label='capacity weather']").count() >= 2
            shoot(page, screenshots, "capacity_weather.png")

            # The task instance's own tab, as a user opens it: Airflow's UI fills the link's placeholders (an
            # unmapped task leaves {MAP_INDEX} as it is) and frames the view.
            page.goto(f"{stack.api_url}/dags/{stack.dag_id}/runs/{urllib.parse.quote(run_id)}/tasks/fine_tune")
            page.get_by_text("SageMaker capacity", exact=True).first.click()
            view = page.frame_locator("iframe")
            view.get_by_text("ml.p4d.24xlarge x 2 (chosen)").wait_for(timeout=30_000)
            view.get_by_text("at on-demand prices").wait_for(timeout=10_000)
            view.get_by_text("GPU memory").wait_for(timeout=10_000)  # the utilization row, every metric measured
            view.get_by_role("heading", name="Advice").wait_for(timeout=10_000)
            view.get_by_text("the first choice alone").wait_for(timeout=10_000)
            assert "int_parsing" not in page.content()
            shoot(page, screenshots, "capacity_task_instance.png")
        finally:
            browser.close()


@pytest.fixture(scope="module")
def planned(nights: tuple[LocalStack, list[tuple[str, str]]]) -> dict[str, Any]:
    """What `make demo` does last: the plan advice, the plan it advises bought, two more nights (the scenario's
    nights 5 and 6), and what the account's plans bought. It moves the clock on: the module's last tests use it."""
    stack, runs = nights
    said, plan = plans_chapter(stack)
    later = later_nights(stack, runs[0][0], NIGHTS + 1)
    return {"stack": stack, "said": said, "plan": plan, "later": later, "used": plans_used(stack)}


def test_the_advised_plan_is_bought_and_the_later_nights_run_on_it(planned, screenshots):
    """The fine-tuning step and the other team's 20-hour pretraining share 1 x ml.p5.48xlarge first: priced each
    on its own, a week's plan costs less than their demand on demand, so the advice is to reserve. The demo buys
    the offering advised, capped at its fee; on night 5 (p5 sold out on demand) and night 6 the other team's job,
    which lists training_plans="auto", runs on the plan, and the pipeline's job does not (it lists no plan). Then
    `plans used` says what the plan bought, and the plan no DAG names sat idle; the Capacity page shows both."""
    from playwright.sync_api import sync_playwright

    from airflow_sm_prefs.evidence import ledger_reading

    stack, said, plan = planned["stack"], planned["said"], planned["plan"]
    group = next(line for line in said.splitlines() if line.startswith("1 x ml.p5.48xlarge in us-east-1 ("))
    assert "nightly_evaluation.fine_tune" in group and "team_b_pretraining.pretrain" in group, said
    assert group.endswith(": reserve"), said
    assert "the plan costs less per job than ml.p5.48xlarge on demand;" in said, said
    assert " --max-usd 10080.00 --yes\nBought training plan " in said and f"training-plan/{plan}" in said, said
    # Nothing in a DAG bought a plan: the one CreateTrainingPlan call is the command's.
    assert control(stack.emulator_url, "calls")["calls"]["CreateTrainingPlan"] == 1

    assert [state for _, state in planned["later"]] == ["success", "success"]
    theirs = sorted(
        ledger_reading.read(stack.ledger_root, dag_id=OTHER_TEAM_DAG).entries, key=lambda e: e["created_at"] or ""
    )
    assert len(theirs) == NIGHTS + 2
    on_plan = [(e.get("training_plan_arn") or "").rpartition("/")[2] for e in theirs]
    assert on_plan == [""] * NIGHTS + [plan, plan]
    assert all((e["outcome"], e["selected_rank"]) == ("completed", 0) for e in theirs[NIGHTS:])
    fine_tunes = [night_record(stack, run_id, "fine_tune") for run_id, _ in planned["later"]]
    assert [(t["selected_rank"], t["selected_instance_type"]) for t in fine_tunes] == [
        (1, "ml.p4d.24xlarge"),
        (0, "ml.p5.48xlarge"),
    ]

    used = planned["used"]
    line = next(line for line in used.splitlines() if line.startswith(f"{plan}: "))
    hours = float(line.split(": ", 1)[1].split(" of ", 1)[0])
    # Two pretraining runs of 20 hours (and the seconds SageMaker bills around them) on its one instance.
    assert 40.0 <= hours < 40.1, line
    assert "by 2 job(s) of team_b_pretraining.pretrain" in line, line
    assert "spare-p4d sat idle: none of the" in used, used

    with sync_playwright() as playwright:
        browser = launched(playwright)
        try:
            page = signed_in_page(browser, stack.api_url, stack.admin_password(), height=1100)
            page.goto(f"{stack.api_url}/sm-prefs/capacity/plans")
            page.get_by_role("heading", name="Would a plan pay?").wait_for(timeout=30_000)
            page.get_by_text("1 x ml.p5.48xlarge in us-east-1").first.wait_for(timeout=10_000)
            page.get_by_text(f"{plan}: ").first.wait_for(timeout=10_000)
            page.get_by_text("spare-p4d sat idle").first.wait_for(timeout=10_000)
            shoot(page, screenshots, "capacity_plans.png")
        finally:
            browser.close()
