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
