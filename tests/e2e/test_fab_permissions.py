"""The Capacity page under the FAB auth manager, with per-DAG permissions from DAGs' ``access_control``.

Two teams' DAGs, each readable by its own team's role only; the ledger holds jobs of both. A user of team A
sees team A's rows only (JSON route and the page, in Chromium), is refused team B's task-instance view, and
an Admin sees both. Airflow's components run one process each (``airflow standalone`` forces the simple
auth manager).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import ledger_writing
from sm_prefs_devkit.local_stack import LocalStack, StackError, wait_for
from tests.browser import launched
from tests.e2e.test_demo_e2e import PROJECT, screenshot_folder
from tests.unit.test_report import entry

pytestmark = pytest.mark.airflow

FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
USERS = {"admin": ("Admin", "admin-password-for-this-test"), "alice": ("team_a", "alice-password-for-this-test")}


def _sync_permissions(stack: LocalStack) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "sync-perm", "--include-dags"],
        env=stack.airflow_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.fixture(scope="module")
def fab_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    pytest.importorskip("airflow.providers.fab", reason="the FAB provider is part of the test extra")
    # The roles must exist before the DAG processor first syncs the DAGs' access_control: it refuses a DAG
    # naming an unknown role, so they are made between the migration and the components' start.
    users = tuple(
        (
            "users",
            "create",
            "-u",
            name,
            "-p",
            password,
            "-r",
            role,
            "-f",
            name,
            "-l",
            "test",
            "-e",
            f"{name}@example.com",
        )
        for name, (role, password) in USERS.items()
    )
    stack = LocalStack(
        project_dir=PROJECT,
        workdir=tmp_path_factory.mktemp("fab"),
        dags_folder=Path(__file__).parent / "dags_fab",
        separate_components=True,
        extra_env={"AIRFLOW__CORE__AUTH_MANAGER": FAB},
        # Reading a task instance's view needs what Airflow's own task instance routes need: the DAG (from its
        # access_control), DAG Runs and Task Instances (FAB's resources for DagAccessEntity.TASK_INSTANCE).
        setup_commands=(
            ("roles", "create", "team_a", "team_b"),
            ("roles", "add-perms", "team_a", "team_b", "-r", "Task Instances", "DAG Runs", "-a", "can_read"),
            *users,
        ),
    )
    try:
        stack.prepare()
        stack.start_emulator()
        stack.start_airflow()
        stack.wait_healthy()
        stack.token = stack.login("admin", USERS["admin"][1])
        for dag_id in ("team_a_pipeline", "team_b_pipeline"):
            wait_for(lambda dag_id=dag_id: stack.dag_known(dag_id), 120, f"{dag_id} to be parsed", every=2)
        _sync_permissions(stack)
        for dag_id in ("team_a_pipeline", "team_b_pipeline"):
            for night in range(3):
                ledger_writing.write({**entry(f"{dag_id}-{night}", night % 2), "dag_id": dag_id}, stack.ledger_root)  # type: ignore[arg-type]
        yield stack
    finally:
        stack.stop()


def _get(stack: LocalStack, path: str, token: str) -> tuple[int, bytes]:
    request = urllib.request.Request(stack.api_url + path, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_team_member_sees_only_the_dags_their_role_may_read(fab_stack):
    alice = fab_stack.login("alice", USERS["alice"][1])
    status, body = _get(fab_stack, "/sm-prefs/capacity/report", alice)
    assert status == 200, body[:300]
    assert {row["dag_id"] for row in json.loads(body)} == {"team_a_pipeline"}
    status, body = _get(fab_stack, "/sm-prefs/capacity/report", fab_stack.token or "")
    assert {row["dag_id"] for row in json.loads(body)} == {"team_a_pipeline", "team_b_pipeline"}
    query = "dag_id=team_b_pipeline&run_id=scheduled__team_b_pipeline-0&task_id=fine_tune"
    status, _ = _get(fab_stack, f"/sm-prefs/capacity/task-instance?{query}", alice)  # an old link, sent on
    assert status == 403
    run = "run_id=scheduled__team_b_pipeline-0&task_id=fine_tune"
    status, _ = _get(fab_stack, f"/sm-prefs/capacity/dags/team_b_pipeline/task-instance?{run}", alice)
    assert status == 403
    own = "run_id=scheduled__team_a_pipeline-0&task_id=fine_tune"
    status, body = _get(fab_stack, f"/sm-prefs/capacity/dags/team_a_pipeline/task-instance?{own}", alice)
    assert status == 200 and b"team_a_pipeline / fine_tune" in body, body[:300]
    with pytest.raises(StackError, match="401"):
        fab_stack.request("GET", "/sm-prefs/capacity/report", auth=False)


def test_the_capacity_page_for_a_team_member_in_the_browser(fab_stack):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launched(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(fab_stack.api_url + "/auth/login/")
            page.get_by_label("Username").fill("alice")
            page.get_by_label("Password").fill(USERS["alice"][1])
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
            page.goto(fab_stack.api_url + "/sm-prefs/capacity")
            page.get_by_role("cell", name="team_a_pipeline / fine_tune").wait_for(timeout=30_000)
            assert page.get_by_text("team_b_pipeline").count() == 0
            page.screenshot(path=str(screenshot_folder("e2e") / "capacity_page_fab_team_a.png"), full_page=True)
        finally:
            browser.close()
