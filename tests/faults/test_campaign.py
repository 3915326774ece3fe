"""The fault campaign: a real Airflow against the emulator, one injected fault per scenario, then an audit.

`make faults` runs this module alone and rewrites its column of docs/reliability.md; `make test` runs it too. Scenarios
share one Airflow (started once) and run in order; each audits only its own DAG runs.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from sm_prefs_devkit.local_stack import wait_for
from tests.faults.audit import Expect, Row, audit, jobs_of, task_key
from tests.faults.invalid import (
    CASES,
    STATIC_GUARDRAIL_CASES,
    TEMPLATED_DAG_ID,
    TEMPLATED_GUARDRAIL_CASES,
    guardrail_task_id,
    mapped_task_id,
    templated_task_id,
)
from tests.faults.report import SQLITE, collect_rows
from tests.faults.stack import ARTIFACTS_DIR, PROJECT_DIR, CampaignStack
from tests.helpers import listening_addresses

pytestmark = pytest.mark.airflow

QUEUED = {"ml.p5.48xlarge": 0, "ml.p4d.24xlarge": 0}
LOG_LINE = re.compile(r"^\[[^\]/]+/algo-\d+-\d+\] ")
ARTIFACTS = ARTIFACTS_DIR / "faults"


@pytest.fixture(scope="module")
def rows(notes: list[str]) -> Iterator[list[Row]]:
    yield from collect_rows(SQLITE, ARTIFACTS / "stack" / "scheduler.log", notes)


LEFT_OUT = (
    "Not run on this topology: 1b, 2c and 2d (they need a second Celery worker or triggerer) and 9 (the shared "
    "store down: it needs the store on S3 behind a connection of its own, as the split hosts have it; each reader "
    "and writer of the store under each fault is tested on its own in [the shared store when it fails]"
    "(shared-store.md))."
)


@pytest.fixture(scope="module")
def notes() -> list[str]:
    """Checks that are not a scenario (security), in words, for the report."""
    return [LEFT_OUT]


@pytest.fixture(scope="module")
def stack(rows: list[Row], notes: list[str]) -> Iterator[CampaignStack]:
    with CampaignStack(project_dir=PROJECT_DIR, workdir=ARTIFACTS / "stack") as campaign:
        yield campaign
    notes.extend(campaign.crash_notes())


def _record(rows: list[Row], row: Row) -> None:
    rows.append(row)
    assert not row.problems, "\n".join(row.problems)


def _states(stack: CampaignStack, dag_id: str, run_id: str) -> dict[str, str]:
    return {task_key(ti["task_id"], ti["map_index"]): ti["state"] for ti in stack.task_instances(dag_id, run_id)}


def _all_deferred(stack: CampaignStack, dag_id: str, run_id: str, count: int) -> bool:
    states = [s for k, s in _states(stack, dag_id, run_id).items() if "[" in k or count == 1]
    return len(states) == count and all(state == "deferred" for state in states)


def _queued_jobs(stack: CampaignStack, dag_id: str, run_id: str) -> int:
    return sum(
        1
        for jobs in jobs_of(stack, dag_id, run_id).values()
        for job in jobs
        if job["status"] == "InProgress" and job["selected"] is None
    )


def _job(stack: CampaignStack, dag_id: str, run_id: str, key: str, index: int = -1) -> dict | None:
    jobs = jobs_of(stack, dag_id, run_id).get(key)
    return jobs[index] if jobs else None


def test_worker_killed_after_create_before_defer(stack: CampaignStack, rows: list[Row]) -> None:
    dag_id = "fault_worker_kill"
    stack.set_capacity(QUEUED)
    # Hold the task right after its create call: the Describe that precedes the deferral answers in 30 s.
    stack.set_faults(slow_operations={"DescribeTrainingJob": 30000})
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _job(stack, dag_id, run_id, "train"), 120, "the job to be created")
    (ti,) = stack.task_instances(dag_id, run_id)
    assert ti["state"] == "running", "the task must still be before its deferral"
    stack.kill_task_process(ti["id"])
    stack.set_faults()
    wait_for(lambda: _states(stack, dag_id, run_id)["train"] == "deferred", 120, "the retry to defer")
    stack.set_capacity({"ml.p5.48xlarge": 1})
    stack.wait_run_done(dag_id, run_id)
    row = audit(
        stack,
        "1. worker SIGKILLed between create and defer",
        "SIGKILL to the task process while a 30 s Describe holds it",
        Expect(dag_id, run_id, {"train": "success"}),
    )
    row.problems.extend(_later_tries_problems(stack, dag_id, run_id, "train"))
    _record(rows, row)


def _later_tries_problems(stack: CampaignStack, dag_id: str, run_id: str, task_id: str) -> list[str]:
    """A task retried after a fault: its second try reattaches to the first try's job, and no later try creates
    or supersedes one."""
    later = stack.task_logs(dag_id, run_id, task_id)[1:]
    if not later:
        return [f"{dag_id}.{task_id} ran once: the fault did not make it retry"]
    problems = [] if "reattach" in later[0] else [f"try 2 did not reattach; its log ends: {later[0][-400:]!r}"]
    creating = [try_number for try_number, log in enumerate(later, 2) if ": create (" in log or "supersede" in log]
    if creating:
        problems.append(f"tries {creating} created or superseded a job")
    return problems


def test_triggerer_killed_while_jobs_queue(stack: CampaignStack, rows: list[Row]) -> None:
    dag_id = "fault_triggerer_restart"
    stack.set_capacity(QUEUED)
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _all_deferred(stack, dag_id, run_id, 4), 180, "four deferred shards")
    wait_for(lambda: _queued_jobs(stack, dag_id, run_id) == 4, 60, "four queued jobs")
    stack.kill_component("triggerer")
    stack.set_capacity({"ml.p5.48xlarge": 2, "ml.p4d.24xlarge": 2})
    # Every job is chosen a configuration while no triggerer is watching.
    wait_for(lambda: _queued_jobs(stack, dag_id, run_id) == 0, 60, "the queue to drain")
    time.sleep(3)
    stack.start_component("triggerer")
    stack.wait_run_done(dag_id, run_id)
    expected = {f"train[{i}]": "success" for i in range(4)}
    title = "2. triggerer SIGKILLed while 4 jobs queue, restarted"
    _record(rows, audit(stack, title, "SIGKILL triggerer", Expect(dag_id, run_id, expected)))


def test_triggerer_killed_while_a_job_logs(stack: CampaignStack, rows: list[Row]) -> None:
    """The job's log lines keep coming across a triggerer restart: every line in the task log once, in order."""
    dag_id = "fault_triggerer_restart_logging"
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _states(stack, dag_id, run_id).get("train") == "deferred", 180, "the task to defer")

    def shown() -> list[str]:
        return [m for m in stack.try_messages(dag_id, run_id, "train", 1) if LOG_LINE.match(m)]

    wait_for(lambda: any("epoch 1/5" in m for m in shown()), 120, "the first epoch in the task log")
    stack.kill_component("triggerer")
    time.sleep(8)  # the job logs on meanwhile (its epochs are 6 s apart at the campaign's 60x)
    stack.start_component("triggerer")
    stack.wait_run_done(dag_id, run_id)
    row = audit(
        stack,
        "2b. triggerer SIGKILLed while a job logs, restarted",
        "SIGKILL triggerer",
        Expect(dag_id, run_id, {"train": "success"}),
    )
    job = _job(stack, dag_id, run_id, "train")
    assert job is not None
    written = stack.job_log_lines(job["name"])
    lines = shown()
    if lines != written:
        row.problems.append(
            f"the task log should show the job's {len(written)} lines once each, in order; it showed {len(lines)} "
            f"({len(lines) - len(set(lines))} repeated)"
        )
    _record(rows, row)


def test_throttling_and_server_errors(stack: CampaignStack, rows: list[Row]) -> None:
    dag_id = "fault_throttling"
    stack.set_capacity(QUEUED)
    stack.set_faults(throttle_rate=0.5, lost_reply_rate=0.1)
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _all_deferred(stack, dag_id, run_id, 4), 180, "four deferred shards")
    stack.set_faults(throttle_rate=0.5, error_rate=0.5)  # nothing gets through for a stretch
    time.sleep(10)
    stack.set_faults(throttle_rate=0.5, lost_reply_rate=0.1)
    stack.set_capacity({"ml.p5.48xlarge": 4})
    time.sleep(15)
    stack.set_faults()
    stack.wait_run_done(dag_id, run_id)
    expected = {"prepare": "success", **{f"train[{i}]": "success" for i in range(4)}}
    faults = "50% throttled throughout, 10% replies lost, 10 s of 100% errors (throttle + 5xx)"
    _record(rows, audit(stack, "3. throttling and 5xx, then recovery", faults, Expect(dag_id, run_id, expected)))


def test_emulator_restarts_while_jobs_wait(stack: CampaignStack, rows: list[Row]) -> None:
    dag_id = "fault_emulator_restart"
    stack.set_capacity(QUEUED)
    run_id = stack.trigger(dag_id)
    wait_for(lambda: _all_deferred(stack, dag_id, run_id, 3), 180, "three deferred shards")
    wait_for(lambda: _queued_jobs(stack, dag_id, run_id) == 3, 60, "three queued jobs")
    stack.kill_emulator()
    time.sleep(8)
    stack.start_emulator()
    stack.set_capacity({"ml.p5.48xlarge": 3})
    stack.wait_run_done(dag_id, run_id)
    expected = {f"train[{i}]": "success" for i in range(3)}
    title = "4. SageMaker (emulator) down 8 s, back with its state"
    _record(rows, audit(stack, title, "SIGKILL emulator", Expect(dag_id, run_id, expected)))


def test_users_mark_failed_clear_and_fail_a_run(stack: CampaignStack, rows: list[Row]) -> None:
    actions, failed_run = "fault_user_actions", "fault_run_marked_failed"
    stack.set_capacity({"ml.p5.48xlarge": 0})
    actions_run = stack.trigger(actions)
    failed_run_id = stack.trigger(failed_run)

    def running(dag_id: str, run_id: str, key: str) -> bool:
        job = _job(stack, dag_id, run_id, key)
        return bool(job and job["secondary_status"] == "Training")

    def deferred(dag_id: str, run_id: str, key: str) -> bool:
        return _states(stack, dag_id, run_id).get(key) == "deferred"

    wait_for(lambda: deferred(actions, actions_run, "marked_failed_while_pending"), 180, "a deferred queued task")
    stack.set_task_state(actions, actions_run, "marked_failed_while_pending", "failed")
    wait_for(
        lambda: (
            deferred(actions, actions_run, "cleared_while_running")
            and running(actions, actions_run, "cleared_while_running")
        ),
        180,
        "a deferred task whose job runs",
    )
    stack.clear_task(actions, actions_run, "cleared_while_running")
    wait_for(
        lambda: (
            all(deferred(failed_run, failed_run_id, k) for k in ("pending", "running"))
            and running(failed_run, failed_run_id, "running")
        ),
        180,
        "a run with one queued and one running job",
    )
    stack.set_run_state(failed_run, failed_run_id, "failed")
    stack.wait_run_done(actions, actions_run)
    row = audit(
        stack,
        "5. user marks a queued task failed, clears a running one, marks a run failed",
        "through the REST API: mark failed, clear, mark run failed",
        Expect(
            actions,
            actions_run,
            {"marked_failed_while_pending": "failed", "cleared_while_running": "success"},
            generations={"cleared_while_running": 2},
        ),
        Expect(failed_run, failed_run_id, {"pending": "failed", "running": "failed"}),
    )
    for dag_id, run_id, key, index in (
        (actions, actions_run, "marked_failed_while_pending", -1),
        (actions, actions_run, "cleared_while_running", 0),
        (failed_run, failed_run_id, "pending", -1),
        (failed_run, failed_run_id, "running", -1),
    ):
        job = _job(stack, dag_id, run_id, key, index)
        if not job or job["status"] != "Stopped":
            row.problems.append(f"{dag_id}/{key}: job should have been stopped: {job and job['status']}")
    _record(rows, row)


def test_the_task_instance_tab_in_airflow_s_own_ui(stack: CampaignStack) -> None:
    """Not a fault: the platforms run this module's Airflow on each supported line, so the tab is clicked there as a
    user clicks it. Each line's UI fills the link's placeholders its own way (3.1 leaves the run id unencoded; an
    unmapped task leaves {MAP_INDEX} as it is), and the view must find the job of the task instance it frames."""
    from playwright.sync_api import sync_playwright

    from tests.browser import launched, signed_in_page

    dag_id = "fault_task_tabs"
    run_id = stack.trigger(dag_id)  # a manual run's id holds "+" and ":", which 3.1's link leaves as they are
    assert stack.wait_run_done(dag_id, run_id) == "success", _states(stack, dag_id, run_id)
    run_page = f"{stack.api_url}/dags/{dag_id}/runs/{urllib.parse.quote(run_id, safe='')}/tasks"
    screenshots = ARTIFACTS / "screenshots"
    screenshots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launched(playwright)
        try:
            page = signed_in_page(browser, stack.api_url, stack.admin_password())
            for name, task_page, key, title in (
                ("unmapped", f"{run_page}/single", "single", f"{dag_id} / single"),
                ("mapped", f"{run_page}/shards/mapped/1", "shards[1]", f"{dag_id} / shards [1]"),
            ):
                (job,) = jobs_of(stack, dag_id, run_id)[key]
                page.goto(task_page)
                page.get_by_text("SageMaker capacity", exact=True).first.click()
                view = page.frame_locator("iframe")
                view.get_by_text("ml.g5.48xlarge x 1 (chosen)").wait_for(timeout=30_000)
                view.get_by_role("heading", name=title, exact=True).wait_for(timeout=10_000)
                # This task instance's own job: the mapped task's second shard, not its first.
                assert job["name"] in view.locator("body").inner_text(), (key, job["name"])
                assert "int_parsing" not in page.content()
                page.screenshot(path=str(screenshots / f"task_tab_{name}.png"), full_page=True)
        finally:
            browser.close()


def test_pending_bound_and_incompatible_fallback(stack: CampaignStack, rows: list[Row]) -> None:
    bound, incompatible = "fault_pending_bound", "fault_incompatible_fallback"
    stack.set_capacity({"ml.p5.48xlarge": 0})
    bound_run = stack.trigger(bound)
    incompatible_run = stack.trigger(incompatible)
    stack.wait_run_done(incompatible, incompatible_run)
    stack.wait_run_done(bound, bound_run)
    row6 = audit(
        stack,
        "6. pending bound expires on one job while a sibling falls back",
        "no capacity (30 min bound)",
        Expect(
            bound,
            bound_run,
            {
                "training_without_capacity": "failed",
                "processing_without_capacity": "failed",
                "sibling_falls_back": "success",
            },
        ),
    )
    for key in ("training_without_capacity", "processing_without_capacity"):
        job = _job(stack, bound, bound_run, key)
        record = stack.xcom(bound, bound_run, key, "record")
        if not job or job["status"] != "Stopped" or not record or record["selected_instance_type"] is not None:
            row6.problems.append(f"{key}: expected a Stopped job and a record without selection: {record}")
    sibling = stack.xcom(bound, bound_run, "sibling_falls_back", "return_value") or {}
    if (sibling.get("selected_rank"), sibling.get("fell_back")) != (1, True):
        row6.problems.append(f"sibling should record preference #2 as a fallback: {sibling}")
    row7 = audit(
        stack,
        "7. the fallback type fails after starting (incompatible-fallback)",
        "container fails on fallback",
        Expect(incompatible, incompatible_run, {"falls_back_then_fails": "failed"}),
    )
    final_log = stack.task_logs(incompatible, incompatible_run, "falls_back_then_fails")[-1]
    if "does not check that your container works on every preference" not in final_log:
        row7.problems.append("the failure does not explain that it ran on a fallback type")
    rows.append(row6)
    _record(rows, row7)
    assert not row6.problems, "\n".join(row6.problems)


def _refused_on_first_try(ti: dict, log: str, expected: str) -> bool:
    """Failed on its first try, before any create, saying why."""
    return (
        ti["state"] == "failed" and ti["try_number"] == 1 and "no SageMaker job was created" in log and expected in log
    )


def test_invalid_configurations_create_nothing(stack: CampaignStack, rows: list[Row]) -> None:
    creates_before = _creates(stack)
    refused = stack.write_refused_dags()
    cases = sum(len(c) for c in CASES.values())
    guardrail_cases = len(STATIC_GUARDRAIL_CASES) + len(TEMPLATED_GUARDRAIL_CASES)
    row = Row(
        "8. invalid configurations: static, static with a templated role, templated, mapped; both kinds; "
        "guardrails (requires=, cost caps, finish_by=, quota preflight)",
        f"{cases} invalid requests x 4 ways + {guardrail_cases} guardrail cases",
    )
    errors = wait_for(
        lambda: (found := stack.import_errors()).keys() >= refused.keys() and found,
        300,
        "an import error for every static invalid DAG",
        every=3,
    )
    for dag_file, (case, expected) in refused.items():
        row.tasks += 1
        if expected in errors[dag_file]:
            row.tasks_ok += 1
        else:
            row.problems.append(f"{case}: import error lacks {expected!r}: {errors[dag_file][-300:]}")
    run_id = stack.trigger(TEMPLATED_DAG_ID)
    stack.wait_run_done(TEMPLATED_DAG_ID, run_id, timeout=400)
    instances = {(ti["task_id"], ti["map_index"]): ti for ti in stack.task_instances(TEMPLATED_DAG_ID, run_id)}
    for case, (_, _, expected) in TEMPLATED_GUARDRAIL_CASES.items():
        row.tasks += 1
        ti = instances[(guardrail_task_id(case), -1)]
        log = stack.task_log(TEMPLATED_DAG_ID, run_id, ti["task_id"], 1)
        if (
            ti["state"] == "failed"
            and ti["try_number"] == 1
            and "no SageMaker job was created" in log
            and expected in log
        ):
            row.tasks_ok += 1
        else:
            state = f"state {ti['state']}, try {ti['try_number']}"
            row.problems.append(f"templated guardrail {case}: {state}, expected {expected!r} in the log")
    for kind, cases in CASES.items():
        for map_index, (case, (_, expected)) in enumerate(cases.items()):
            # Expanded at run time: judged when Airflow builds the operator, and never retried.
            row.tasks += 1
            mapped = instances[(mapped_task_id(kind), map_index)]
            log = stack.task_log(TEMPLATED_DAG_ID, run_id, mapped["task_id"], 1, map_index=map_index)
            if mapped["state"] == "failed" and mapped["try_number"] == 1 and expected in log:
                row.tasks_ok += 1
            else:
                state = f"state {mapped['state']}, try {mapped['try_number']}"
                row.problems.append(f"mapped {kind} {case}: {state}, expected {expected!r} in the log")
        for case, (_, expected) in cases.items():
            row.tasks += 1
            ti = instances[(templated_task_id(kind, case), -1)]
            log = stack.task_log(TEMPLATED_DAG_ID, run_id, ti["task_id"], 1)
            if _refused_on_first_try(ti, log, expected):
                row.tasks_ok += 1
            else:
                state = f"state {ti['state']}, try {ti['try_number']}"
                row.problems.append(f"templated {kind} {case}: {state}, expected {expected!r} in the log")
    row.jobs = _creates(stack) - creates_before
    if row.jobs:
        row.problems.append(f"{row.jobs} create call(s) reached SageMaker")
    _record(rows, row)


def _creates(stack: CampaignStack) -> int:
    calls = stack.calls()
    return calls.get("CreateTrainingJob", 0) + calls.get("CreateProcessingJob", 0)


def test_security_basics(stack: CampaignStack, notes: list[str]) -> None:
    for port in (stack.api_port, stack.emulator_port):
        assert listening_addresses(port) == {"127.0.0.1"}, f"port {port} must listen on loopback only"
    assert stack.secret_key in stack.airflow_env()["AIRFLOW_CONN_AWS_DEFAULT"]
    files = [path for path in stack.workdir.rglob("*") if path.is_file()]
    leaks = [str(p.relative_to(stack.workdir)) for p in files if stack.secret_key.encode() in p.read_bytes()]
    assert leaks == [], f"the connection's secret key appears in {leaks}"
    password = stack.admin_password()
    assert len(password) >= 12 and password != "admin", "the admin password must be generated per run"
    assert not any("PASSWORD" in key or "ALL_ADMINS" in key for key in stack.airflow_env())
    notes.append(
        f"Security, same run: the API server and the emulator listen on 127.0.0.1 only; the connection's secret "
        f"key is in none of the {len(files)} files the run left (task and trigger logs, component logs, the "
        f"metadata database with every XCom and task state); the admin password is generated for the run "
        f"({len(password)} characters), none is configured."
    )
