from __future__ import annotations

import pytest

from airflow_sm_prefs.request.preferences import JOB_NAME_SHAPE
from airflow_sm_prefs.task.attempts import (
    DEFERRED,
    FINISHED,
    KEPT,
    RESUMED,
    SUBMITTED,
    SUBMITTING,
    ClaimStore,
    Decision,
    JobClaim,
    decide,
    default_base_name,
    first_try_since_clear,
    generation_name,
    generation_of,
    latest_generation,
    name_stem,
)


def claim(phase: str, try_number: int = 1, generation: int = 1) -> JobClaim:
    return JobClaim(
        job_name=generation_name("base", generation),
        base_name="base",
        generation=generation,
        phase=phase,
        try_number=try_number,
    )


def test_first_execution_creates_the_base_name():
    assert decide(None, "base", None, first_try=1, resubmit_after_failure=True) == Decision(
        "create", "base", 1, "no earlier job for this task instance"
    )


def _while_the_job_runs(claimed_by_try: int, first_try: int) -> Decision:
    """What a try decides about the job a deferred try claimed, the job still InProgress."""
    return decide(
        claim(DEFERRED, try_number=claimed_by_try),
        "base",
        "InProgress",
        first_try=first_try,
        resubmit_after_failure=True,
    )


@pytest.mark.parametrize(
    ("claimed_by_try", "first_try"),
    [
        (1, 1),  # try 1 crashed (or Airflow failed it while deferred: apache/airflow#66374); try 2 runs
        (2, 1),  # the second try's claim, read by the third
        (3, 3),  # the first try after a clear claimed the job; its retry reattaches too
    ],
)
def test_a_retry_reattaches_to_its_running_job(claimed_by_try, first_try):
    decision = _while_the_job_runs(claimed_by_try, first_try)
    assert decision == Decision("reattach", "base", 1, "job base is still InProgress")


def test_a_claim_whose_create_never_happened_creates_the_same_name():
    decision = decide(claim(SUBMITTING), "base", None, first_try=1, resubmit_after_failure=True)
    assert decision == Decision("create", "base", 1, "job base was claimed but never created")
    second = decide(claim(SUBMITTING, generation=2), "base", None, first_try=1, resubmit_after_failure=True)
    assert (second.job_name, second.generation) == ("base-r2", 2), "the same generation, not the next"


def test_a_completed_job_is_reported_not_relaunched_by_a_retry():
    # Even when the task saw the outcome and Airflow failed the try anyway: the retry must not relaunch.
    decision = decide(
        claim(FINISHED, try_number=1, generation=2), "base", "Completed", first_try=1, resubmit_after_failure=True
    )
    assert decision == Decision("finished", "base-r2", 2, "job base-r2 already completed")


def test_clearing_a_task_whose_job_completed_runs_the_next_generation():
    decision = decide(claim(FINISHED, try_number=1), "base", "Completed", first_try=2, resubmit_after_failure=True)
    assert decision == Decision(
        "create", "base-r2", 2, "the task was cleared after job base completed; starting generation 2"
    )


def test_a_stopping_job_is_never_reattached():
    decision = decide(claim(RESUMED), "base", "Stopping", first_try=1, resubmit_after_failure=True)
    assert (decision.action, decision.job_name) == ("create", "base-r2")


@pytest.mark.parametrize("status", ["Failed", "Stopped"])
def test_a_failed_job_starts_the_next_generation_or_fails_by_policy(status):
    decision = decide(claim(RESUMED), "base", status, first_try=1, resubmit_after_failure=True)
    assert decision == Decision("create", "base-r2", 2, f"job base ended {status}; starting generation 2")
    refused = decide(claim(RESUMED, generation=3), "base", status, first_try=1, resubmit_after_failure=False)
    assert refused == Decision("fail", "base-r3", 3, f"job base-r3 ended {status} and resubmit_after_failure is off")


@pytest.mark.parametrize(("claimed_by_try", "first_try"), [(1, 2), (2, 4)])
def test_a_clear_while_the_job_runs_supersedes_it(claimed_by_try, first_try):
    # The claim predates the first try since the clear: the user asked for a fresh run.
    decision = _while_the_job_runs(claimed_by_try, first_try)
    assert decision == Decision(
        "supersede",
        "base-r2",
        2,
        f"the task was cleared while job base ran (try {claimed_by_try}); stopping it and starting afresh",
    )


def kept(after_try: int) -> JobClaim:
    """The claim as the listener leaves it when try ``after_try`` failed for a reason it cannot attribute."""
    return JobClaim("base", "base", 1, KEPT, 1, kept_after_try=after_try)


def test_a_clear_right_after_a_try_whose_job_was_kept_reattaches_to_it():
    """Try 2 was failed by Airflow's race while its job ran; the user clears it (try 3, first since the clear)."""
    decision = decide(kept(after_try=2), "base", "InProgress", first_try=3, resubmit_after_failure=True, try_number=3)
    assert decision == Decision("reattach", "base", 1, "job base is still InProgress, kept running after try 2 failed")


def test_a_clear_right_after_a_try_whose_kept_job_completed_records_it_instead_of_running_again():
    decision = decide(kept(after_try=2), "base", "Completed", first_try=3, resubmit_after_failure=True, try_number=3)
    assert decision == Decision("finished", "base", 1, "job base already completed")


def test_a_kept_jobs_failure_follows_the_failure_policy():
    assert (
        decide(kept(after_try=2), "base", "Failed", first_try=3, resubmit_after_failure=False, try_number=3).action
        == "fail"
    )
    assert (
        decide(kept(after_try=2), "base", "Failed", first_try=3, resubmit_after_failure=True, try_number=3).action
        == "create"
    )


@pytest.mark.parametrize("try_number", [4, 5, None])
def test_the_mark_counts_only_for_the_try_right_after_the_one_that_failed(try_number):
    """Before 3.3 the mark is a tag that stays on the job: a later clear (after the reattaching try finished) is
    a user's request for a fresh run again."""
    assert (
        decide(
            kept(after_try=2), "base", "InProgress", first_try=4, resubmit_after_failure=True, try_number=try_number
        ).action
        == "supersede"
    )
    assert (
        decide(
            kept(after_try=2), "base", "Completed", first_try=4, resubmit_after_failure=True, try_number=try_number
        ).action
        == "create"
    )


@pytest.mark.parametrize(
    ("max_tries", "retries", "first"),
    [
        (2, 2, 1),  # try 1 of a task with two retries
        (3, 2, 2),  # cleared during try 1: Airflow set max_tries = 1 + 2
        (0, 0, 1),
        (1, 0, 2),  # cleared during try 1 of a task without retries
        (2, 3, 1),  # retries raised in the DAG since: never below 1
    ],
)
def test_the_first_try_since_a_clear_follows_airflows_formula(max_tries, retries, first):
    assert first_try_since_clear(max_tries, retries) == first


def test_names_are_deterministic_valid_and_bounded():
    first = default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", -1)
    assert first == default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", -1)
    assert first != default_base_name("nightly_eval", "fine_tune", "scheduled__2026-11-30T00:00:00+00:00", 3)
    long_name = default_base_name("d" * 200, "t" * 200, "r", 0)
    for name in (first, long_name, generation_name(long_name, 12), generation_name("x" * 63, 2)):
        assert len(name) <= 63 and JOB_NAME_SHAPE.fullmatch(name), name


@pytest.mark.parametrize("base", ["eval-job", "x" * 63, "a-" * 31 + "b", "ends-r2"])
def test_every_generations_name_reads_back_as_its_generation_and_contains_the_stem(base):
    for generation in (1, 2, 9, 10, 123):
        name = generation_name(base, generation)
        assert generation_of(name, base) == generation, name
        assert name_stem(base) in name, "the listing filter must find every generation"


@pytest.mark.parametrize(
    "other",
    [
        "eval-job-r1",
        "eval-job-r0",
        "eval-job-rx",
        "eval-job-2",
        "eval-job-r2-r3",
        "other-eval-job",
        "eval-jo",
        "eval-job-",
    ],
)
def test_names_of_other_jobs_are_no_generation(other):
    assert generation_of(other, "eval-job") is None


def test_the_latest_generation_is_the_highest_not_the_last_listed():
    names = ["eval-job-r10", "eval-job", "eval-job-r9", "eval-job-other", "eval-job-r2"]
    assert latest_generation(names, "eval-job") == (10, "eval-job-r10")
    assert latest_generation(["eval-job-other"], "eval-job") is None
    assert latest_generation([], "eval-job") is None


class FakeStore:
    def __init__(self):
        self.values = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value, retention=None):
        self.values[key] = value


def test_ledger_round_trip_and_absent_store():
    claims = ClaimStore(FakeStore())
    saved = claims.save(claim(SUBMITTED))
    assert claims.load() == saved
    assert ClaimStore.from_context({}).load() is None
    assert claims.has_store and not ClaimStore.from_context({}).has_store


def test_the_derived_names_are_the_ones_earlier_releases_derived():
    """A retry after an upgrade finds its job by this name: a change to the derivation would launch a second job."""
    run = "scheduled__2026-11-30T00:00:00+00:00"
    assert default_base_name("Nightly_Eval", "train.Step", run, -1) == "nightly-eval-train-step-d6c9c7dafa"
    assert default_base_name("___", "...", "r", 0) == "job-2f80c11558"
    assert default_base_name("d" * 200, "t" * 200, "r", 0) == "d" * 18 + "-" + "t" * 30 + "-45a20ddc43"
    assert generation_name("a" * 58 + "--bbbbb", 2) == "a" * 58 + "-r2", "no doubled hyphen before the suffix"
    assert name_stem("a" * 57 + "--bbbbbb") == "a" * 57


class RecordingTI:
    """A task instance whose XCom remembers how it was asked: Airflow before 3.3 keeps the claim there."""

    def __init__(self, map_index: int | None) -> None:
        self.task_id, self.map_index = "train", map_index
        self.pushed: dict[str, object] = {}
        self.pulls: list[dict[str, object]] = []

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value

    def xcom_pull(self, **asked: object) -> object:
        self.pulls.append(asked)
        return self.pushed.get(str(asked["key"]))


@pytest.mark.parametrize(("map_index", "asked_for"), [(None, -1), (-1, -1), (3, 3)])
def test_before_3_3_the_claim_is_this_map_index_s_xcom(map_index, asked_for):
    from airflow_sm_prefs.task.attempts import STATE_KEY

    ti = RecordingTI(map_index)
    claims = ClaimStore.from_context({"ti": ti})
    assert not claims.has_store and claims.load() is None
    saved = claims.save(claim(DEFERRED, generation=2))
    assert ti.pushed[STATE_KEY]["job_name"] == "base-r2"
    assert claims.load() == saved
    assert ti.pulls[-1] == {"task_ids": "train", "key": STATE_KEY, "map_indexes": asked_for}


def test_with_a_task_state_store_the_claim_lives_there_and_never_in_xcom():
    from airflow_sm_prefs.task.attempts import STATE_KEY

    class Store(dict):
        def set(self, key: str, value: object, retention: object = None) -> None:
            self[key] = value

    ti, store = RecordingTI(None), Store()
    claims = ClaimStore.from_context({"ti": ti, "task_state_store": store})
    assert claims.has_store
    saved = claims.save(claim(SUBMITTED))
    assert store[STATE_KEY]["phase"] == SUBMITTED and ti.pushed == {}
    assert claims.load() == saved and ti.pulls == []
    assert ClaimStore.from_context({}).load() is None, "no task instance, no claim"


def test_a_stored_claim_reads_back_from_json_text_and_advances_keeping_the_rest():
    import json
    from dataclasses import asdict

    stored = claim(DEFERRED, try_number=2, generation=3)
    assert JobClaim.from_stored(json.dumps(asdict(stored))) == stored
    assert JobClaim.from_stored("{not json") is None
    moved = stored.advanced(RESUMED, pending_until="2026-12-01T02:00:00+00:00")
    assert (moved.phase, moved.pending_until, moved.generation) == (RESUMED, "2026-12-01T02:00:00+00:00", 3)


def test_the_connection_settings_keep_the_hooks_own_argument_names():
    from airflow_sm_prefs.sagemaker.connection import Connection

    assert Connection("c", "eu-west-1", False, {"connect_timeout": 5}).hook_arguments() == {
        "aws_conn_id": "c",
        "region_name": "eu-west-1",
        "verify": False,
        "config": {"connect_timeout": 5},
    }


def test_a_connection_does_not_change_under_its_holders():
    """One value travels from the operator to the task, the trigger, the claim and every client: the caller's
    dict changed later, a client's own deadlines, another Region, a hook's arguments edited: none reach it."""
    from airflow_sm_prefs.sagemaker.connection import Connection

    given = {"retries": {"max_attempts": 4}}
    connection = Connection("c", "eu-west-1", None, given)
    given["retries"]["max_attempts"] = 99
    handed_out = connection.hook_arguments()
    handed_out["config"]["retries"]["max_attempts"] = 1
    bounded = connection.with_call_config({"connect_timeout": 5})
    elsewhere = connection.in_region("us-east-1")
    assert connection.hook_arguments()["config"] == {"retries": {"max_attempts": 4}}
    assert bounded.hook_arguments()["config"] == {"retries": {"max_attempts": 4}, "connect_timeout": 5}
    assert (elsewhere.region_name, connection.region_name) == ("us-east-1", "eu-west-1")
    assert Connection.of_hook_arguments(connection.hook_arguments()) == connection
    for verify in (False, "/etc/ssl/team-ca.pem"):
        checked = Connection("c", "eu-west-1", verify, None)
        assert Connection.of_hook_arguments(checked.hook_arguments()) == checked
    assert Connection.of_hook_arguments({}) == Connection("aws_default"), "0.1.0's trigger named no connection"
    # What shares a hook, a watcher or a log reader: equal settings share, any difference does not.
    assert connection.key == Connection("c", "eu-west-1", None, {"retries": {"max_attempts": 4}}).key
    assert len({connection.key, bounded.key, elsewhere.key, Connection("c", "eu-west-1", False, given).key}) == 4
