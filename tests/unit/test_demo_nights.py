"""The demo moves the clock to the next night only once the other team's task of this night created its job."""

from __future__ import annotations

import pytest

from sm_prefs_devkit import demo, local_stack


class _Stack:
    def __init__(self, *states: str | None) -> None:
        self.states = list(states)
        self.asked = 0

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        assert (dag_id, run_id) == (demo.OTHER_TEAM_DAG, "theirs")
        self.asked += 1
        return [{"task_id": "pretrain", "state": self.states[min(self.asked, len(self.states)) - 1]}]


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch):
    monkeypatch.setattr(local_stack.time, "sleep", lambda seconds: None)


def test_a_task_not_yet_deferred_is_waited_for():
    stack = _Stack(None, "scheduled", "queued", "running", "deferred")
    demo._job_created(stack, "theirs", timeout=60)
    assert stack.asked == 5


@pytest.mark.parametrize("state", ["deferred", "success", "failed"])
def test_a_task_deferred_or_ended_has_created_its_job_or_never_will(state):
    stack = _Stack(state)
    demo._job_created(stack, "theirs", timeout=60)
    assert stack.asked == 1


def test_a_task_that_never_gets_there_is_named(monkeypatch):
    clock = iter(range(0, 1000, 30))
    monkeypatch.setattr(local_stack.time, "monotonic", lambda: next(clock))
    with pytest.raises(TimeoutError, match="run theirs of team_b_pretraining to create its job"):
        demo._job_created(_Stack("running"), "theirs", timeout=60)
