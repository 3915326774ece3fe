"""The campaign stack's restart policy: a component that exits on its own is restarted and reported; one the
campaign kills stays down. Plain processes stand in for Airflow's components (no Airflow started)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sm_prefs_devkit.local_stack import wait_for
from tests.faults.stack import PROJECT_DIR, CampaignStack, Crash, last_exception

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CampaignStack:
    campaign = CampaignStack(project_dir=PROJECT_DIR, workdir=tmp_path)
    restarted: list[str] = []

    def start_component(component: str) -> None:
        restarted.append(component)
        campaign.components[component] = campaign._spawn(SLEEPER, f"{component}.log")

    monkeypatch.setattr(campaign, "start_component", start_component)
    campaign.restarted = restarted  # type: ignore[attr-defined]
    return campaign


def test_a_component_that_exits_on_its_own_is_restarted_and_its_exception_reported(stack: CampaignStack) -> None:
    log = stack.workdir / "scheduler.log"
    log.write_text("Traceback (most recent call last):\nValueError: earlier\nsqlalchemy.orm.exc.StaleDataError: boom\n")
    crashing = stack._spawn([sys.executable, "-c", "raise SystemExit(3)"], "scheduler.log")
    stack.components["scheduler"] = crashing
    stack.start_restart_policy()
    try:
        wait_for(lambda: stack.crashes, 30, "the crash to be seen", every=0.1)
        with stack._supervision:  # the policy's round that saw it has ended: the restart is done
            assert stack.crashes == [Crash("scheduler", 3, "sqlalchemy.orm.exc.StaleDataError: boom")]
            assert stack.restarted == ["scheduler"]  # type: ignore[attr-defined]
            assert stack.components["scheduler"] is not crashing and stack.components["scheduler"].poll() is None
            assert crashing not in stack.processes  # the stack's health wait must not see the dead one
        assert stack.crash_notes() == [
            "Airflow's scheduler exited on its own (code 3: sqlalchemy.orm.exc.StaleDataError: boom) and was "
            "restarted, as the platform's restart policy would."
        ]
    finally:
        stack.stop()


def test_a_component_the_campaign_kills_stays_down(stack: CampaignStack) -> None:
    stack.components["triggerer"] = stack._spawn(SLEEPER, "triggerer.log")
    stack.start_restart_policy()
    try:
        stack.kill_component("triggerer")
        stopped = stack._stopping.wait(2.5)  # more than two rounds of the policy
        assert not stopped and "triggerer" not in stack.components and stack.restarted == []  # type: ignore[attr-defined]
        assert stack.crashes == []
    finally:
        stack.stop()


def test_last_exception_reads_the_last_exception_line(tmp_path: Path) -> None:
    log = tmp_path / "component.log"
    assert last_exception(log) == "no exception in its log"
    log.write_text("2026-12-02T22:38:23Z [error    ] XCom not found\nKeyError: 'x'\nall good\n")
    assert last_exception(log) == "KeyError: 'x'"


def test_stopping_the_stack_stops_the_policy_first(stack: CampaignStack) -> None:
    stack.components["scheduler"] = stack._spawn(SLEEPER, "scheduler.log")
    stack.start_restart_policy()
    stack.stop()  # SIGTERM to every process: none of them may come back
    assert stack._supervisor is None and stack.restarted == []  # type: ignore[attr-defined]
    assert stack.processes == [] and stack.components == {}


def _scripted_health(stack: CampaignStack, monkeypatch: pytest.MonkeyPatch, answers: list[str | None]) -> None:
    """The scheduler's health as the API would report it, one answer per look, the last one repeated."""
    stack.liveness_period = 0.0
    monkeypatch.setattr(stack, "scheduler_health", lambda: answers.pop(0) if len(answers) > 1 else answers[0])


def test_a_scheduler_that_stops_heartbeating_without_exiting_is_killed_and_restarted(stack, monkeypatch):
    """Airflow 3.1.6's scheduler can hang after a StaleDataError instead of exiting: the liveness check kills
    it after the grace and starts another, and the report says so."""
    (stack.workdir / "scheduler.log").write_text("sqlalchemy.orm.exc.StaleDataError: UPDATE expected 4 rows\n")
    hung = stack.components["scheduler"] = stack._spawn(SLEEPER, "scheduler.log")
    stack.liveness_grace = 2.0
    _scripted_health(stack, monkeypatch, ["healthy", "unhealthy"])
    stack.start_restart_policy()
    try:
        wait_for(lambda: stack.crashes, 30, "the hung scheduler to be restarted", every=0.1)
        with stack._supervision:
            reason = "sqlalchemy.orm.exc.StaleDataError: UPDATE expected 4 rows"
            assert stack.crashes == [Crash("scheduler", None, reason)]
            assert hung.poll() is not None and hung not in stack.processes, "the hung one was killed"
            assert stack.restarted == ["scheduler"]  # type: ignore[attr-defined]
        assert stack.crash_notes() == [
            "Airflow's scheduler stopped heartbeating without exiting (its last exception: "
            "sqlalchemy.orm.exc.StaleDataError: UPDATE expected 4 rows) and was killed and restarted after 2 s "
            "unhealthy, as a platform's liveness probe would."
        ]
    finally:
        stack.stop()


@pytest.mark.parametrize(
    "answers",
    [["unhealthy"], ["healthy", None], ["healthy", "unhealthy", "healthy"]],
    ids=["never healthy yet (starting)", "the API server does not answer", "healthy again within the grace"],
)
def test_a_scheduler_is_left_alone_unless_it_was_healthy_and_stayed_unhealthy_past_the_grace(
    stack, monkeypatch, answers
):
    stack.components["scheduler"] = stack._spawn(SLEEPER, "scheduler.log")
    stack.liveness_grace = 1.5
    _scripted_health(stack, monkeypatch, answers)
    stack.start_restart_policy()
    try:
        stopped = stack._stopping.wait(4.0)  # past the grace, more than three rounds of the policy
        assert not stopped and stack.crashes == [] and stack.restarted == []  # type: ignore[attr-defined]
    finally:
        stack.stop()
