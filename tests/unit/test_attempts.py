from __future__ import annotations

import pytest

from airflow_sm_prefs.attempts import (
    DEFERRED,
    FINISHED,
    RESUMED,
    SUBMITTED,
    SUBMITTING,
    JobClaim,
    JobLedger,
    decide,
    default_base_name,
    generation_name,
)
from airflow_sm_prefs.preferences import JOB_NAME_SHAPE


def claim(phase: str, try_number: int = 1, generation: int = 1) -> JobClaim:
    return JobClaim(
        job_name=generation_name("base", generation),
        base_name="base",
        generation=generation,
        phase=phase,
        try_number=try_number,
    )


def test_first_execution_creates_the_base_name():
    assert decide(None, "base", None, 1, True).action == "create"


@pytest.mark.parametrize("phase", [SUBMITTING, SUBMITTED, RESUMED, "blocking"])
def test_a_crashed_try_reattaches_to_its_running_job(phase):
    decision = decide(claim(phase), "base", "InProgress", 2, True)
    assert (decision.action, decision.job_name) == ("reattach", "base")


def test_a_claim_whose_create_never_happened_creates_the_same_name():
    decision = decide(claim(SUBMITTING), "base", None, 2, True)
    assert (decision.action, decision.job_name, decision.generation) == ("create", "base", 1)


def test_a_completed_job_is_reported_not_relaunched_after_a_crash():
    assert decide(claim(RESUMED), "base", "Completed", 2, True).action == "finished"


def test_clearing_a_task_whose_job_completed_runs_the_next_generation():
    decision = decide(claim(FINISHED, try_number=1), "base", "Completed", 2, True)
    assert (decision.action, decision.job_name) == ("create", "base-r2")
    assert decide(claim(FINISHED, try_number=2), "base", "Completed", 2, True).action == "finished"


def test_a_stopping_job_is_never_reattached():
    decision = decide(claim(RESUMED), "base", "Stopping", 2, True)
    assert (decision.action, decision.job_name) == ("create", "base-r2")


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_a_failed_job_starts_the_next_generation_or_fails_by_policy(status):
    decision = decide(claim(RESUMED), "base", status, 2, True)
    assert (decision.action, decision.job_name, decision.generation) == ("create", "base-r2", 2)
    assert decide(claim(RESUMED), "base", status, 2, False).action == "fail"


def test_a_try_ended_by_a_user_while_deferred_supersedes_the_job():
    decision = decide(claim(DEFERRED, try_number=1), "base", "InProgress", 2, True)
    assert (decision.action, decision.job_name) == ("supersede", "base-r2")


def test_the_same_try_resuming_does_not_supersede():
    assert decide(claim(DEFERRED, try_number=2), "base", "InProgress", 2, True).action == "reattach"


def test_names_are_deterministic_valid_and_bounded():
    first = default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", -1)
    assert first == default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", -1)
    assert first != default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", 3)
    long_name = default_base_name("d" * 200, "t" * 200, "r", 0)
    for name in (first, long_name, generation_name(long_name, 12), generation_name("x" * 63, 2)):
        assert len(name) <= 63 and JOB_NAME_SHAPE.fullmatch(name), name


class FakeStore:
    def __init__(self):
        self.values = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value, retention=None):
        self.values[key] = value


def test_ledger_round_trip_and_absent_store():
    ledger = JobLedger(FakeStore())
    saved = ledger.save(claim(SUBMITTED))
    assert ledger.load() == saved
    assert JobLedger.from_context({}).load() is None
