"""The report's rules pinned whole: each verdict path with its exact reason and figures, the lead's words for every
cause, and a row's figures at their edges. Written against the mutants of ``analysis/report.py`` that the broader
tests in test_report.py let live (a boundary moved by one, a word changed, a figure taken from the wrong job)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pendulum

from airflow_sm_prefs.analysis import report
from tests.unit.test_report import CUDA, NO_BUCKET, entry

NIGHTS = [f"2026-11-{day}T02:00:00+00:00" for day in range(25, 31)]
CODE = "AlgorithmError: the training script raised KeyError: 'label' (exit code 1)"
SERVICE = "InternalServerError: We encountered an internal error. Please try again."


def judged(entries: list[dict[str, Any]], **given: Any) -> dict[str, Any]:
    """The judgement's fields but the estimate (its curves have tests of their own)."""
    fields = dataclasses.asdict(report.verdict(entries, **given))  # type: ignore[arg-type]
    fields.pop("estimate")
    return fields


def third_choice(name: str, **fields: Any) -> dict[str, Any]:
    """A job on the list's third preference, 4 x ml.g5.48xlarge."""
    listed = [*entry(name, 0)["preferences"], {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4}]
    picked = {"selected_rank": 2, "selected_instance_type": "ml.g5.48xlarge", "selected_instance_count": 4}
    return {**entry(name, 1, **fields), **picked, "preferences": listed}


# -- each way to a verdict, its words and figures ------------------------------------------------------------------


def test_fallbacks_none_of_which_completed_did_not_pay_off_and_keep_the_first_choices_run():
    entries = [
        entry("a", 0, run=1800),
        entry("b", 0, run=3600),
        entry("c", 1, outcome="stopped", run=None),
        entry("d", 1, outcome="failed_after_start", failure_reason=CODE),
    ]
    assert judged(entries) == {
        "label": "did_not_pay_off",
        "reason": "no job that fell back completed",
        "first_choice_run": 1800.0,
        "break_even": None,
        "sooner_seconds": None,
        "sooner_at_least": None,
        "premium": None,
    }
    (row,) = report.summarize(entries)
    assert row["summary"] == (
        "fell back in 2 of 4 jobs; 1 job failed in the code (AlgorithmError: the training script raised KeyError: "
        "'label' (exit code 1))"
    )


def test_lists_that_name_no_first_choice_leave_the_verdict_open_with_the_break_even():
    unlisted = {"preferences": []}
    entries = [entry("a", 0, **unlisted), entry("b", 1, **unlisted), entry("c", 1, **unlisted)]
    assert judged(entries) == {
        "label": "not_enough_data",
        "reason": "the fallback pays off if the first choice would have stayed unavailable for more than 10m00s; "
        "the jobs' lists name no first choice with a count",
        "first_choice_run": 3600.0,
        "break_even": 600.0,
        "sooner_seconds": None,
        "sooner_at_least": None,
        "premium": None,
    }


def test_a_fallback_that_gains_nothing_did_not_pay_off_and_half_a_second_is_a_gain():
    """Waiting would have given the results at the same moment: nothing was gained by falling back."""
    level = [entry("a", 0, pending=300), entry("b", 1, pending=60, run=3840), entry("c", 1, pending=60, run=3840)]
    evidence = "(2 seen free, 0 seen busy, from nightly.fine_tune)"
    assert judged(level) == {
        "label": "did_not_pay_off",
        "reason": "waiting would have finished sooner: at the times jobs fell back, the first choice was free after a "
        f"median 5m00s {evidence}; the fallback pays off if the first choice would have stayed unavailable for "
        "more than 5m00s",
        "first_choice_run": 3600.0,
        "break_even": 300.0,
        "sooner_seconds": 0.0,
        "sooner_at_least": None,
        "premium": None,
    }
    (row,) = report.summarize(level)
    assert row["summary"] == "fell back in 2 of 3 jobs: waiting would have given results ~0s sooner"
    ahead = [entry("a", 0, pending=300), entry("b", 1, pending=60, run=3839.5), entry("c", 1, pending=60, run=3839.5)]
    assert judged(ahead) == {
        "label": "paid_off",
        "reason": f"at the times jobs fell back, the first choice would have taken a median 5m00s {evidence}; the "
        "fallback pays off if the first choice would have stayed unavailable for more than 5m00s; cost not judged "
        "(no known price on one side, or plan-backed)",
        "first_choice_run": 3600.0,
        "break_even": 299.5,
        "sooner_seconds": 0.5,
        "sooner_at_least": None,
        "premium": None,
    }
    (row,) = report.summarize(ahead)
    assert row["summary"] == "fell back in 2 of 3 jobs: results ~0s sooner"


def test_with_no_first_choice_run_known_the_break_even_counts_none_and_says_so():
    entries = [entry("a", 0, outcome="stopped", run=None), entry("b", 1, pending=300), entry("c", 1, pending=200)]
    verdict = judged(entries)
    assert verdict["first_choice_run"] is None and verdict["break_even"] == 3800.0
    assert verdict["reason"].endswith(
        "unavailable for more than 1h03m20s (no first-choice run known, so counting none: an upper bound)"
    )


def test_the_first_choices_run_is_its_completed_jobs_only():
    stopped_early = entry("s", 0, outcome="stopped", run=100)
    entries = [entry("a", 0, pending=7200), stopped_early, entry("b", 1, pending=300), entry("c", 1, pending=200)]
    assert judged(entries)["first_choice_run"] == 3600.0


def busy_at_the_fallbacks(run: float) -> list[dict[str, Any]]:
    """The first choice free after a minute on one night; on the next two, fallbacks that ran ``run`` seconds after
    waiting 5 minutes with it listed (seen busy 5 minutes at their times; break-even: 5 minutes + ``run`` - 1 h)."""
    return [
        entry("a", 0, pending=60, created=NIGHTS[1]),
        entry("b", 1, pending=300, run=run, created=NIGHTS[2]),
        entry("c", 1, pending=300, run=run, created=NIGHTS[3]),
    ]


def test_seen_busy_short_of_the_break_even_leaves_it_open_and_names_the_history_it_left_out():
    """The first choice was seen busy for 5 minutes at the fallbacks' times, against a break-even of 10; the task's
    own first-choice nights (a median 2 minutes) are the nights it had room, and decide nothing."""
    entries = [entry("early", 0, pending=120, created=NIGHTS[0]), *busy_at_the_fallbacks(run=3900)]
    assert judged(entries) == {
        "label": "not_enough_data",
        "reason": "the fallback pays off if the first choice would have stayed unavailable for more than 10m00s; at "
        "the times jobs fell back the ledger shows it busy for at most 5m00s (0 seen free, 2 seen busy, from "
        "nightly.fine_tune): a job listing 1 x ml.p5.48xlarge then, in another task or DAG of the same account and "
        "Region, would decide it; this task's own first-choice waits on other nights (median 2m00s) are left out, "
        "for they come from the nights the first choice had room",
        "first_choice_run": 3600.0,
        "break_even": 600.0,
        "sooner_seconds": None,
        "sooner_at_least": None,
        "premium": None,
    }


def test_seen_busy_short_of_the_break_even_with_no_history_names_the_evidence_that_would_decide():
    entries = busy_at_the_fallbacks(run=3900)
    assert judged(entries)["reason"].endswith(
        "from nightly.fine_tune): a job listing 1 x ml.p5.48xlarge then, in another task or DAG of the same "
        "account and Region, would decide it"
    )


def test_without_a_fallback_or_a_first_choice_the_reasons_say_which():
    assert judged([entry("a", 0), entry("b", 0), entry("c", 0)])["reason"] == (
        "no job fell back in the window: the list has not been put to the test"
    )
    never_first = [entry("a", 1), entry("b", 1), entry("c", 1, outcome="failed_after_start", failure_reason=CUDA)]
    assert judged(never_first)["reason"] == (
        "2 x ml.p4d.24xlarge (#2) failed on its hardware in 1 of 3 jobs; the first choice never ran in the window"
    )


def test_seen_busy_exactly_as_long_as_the_break_even_is_enough():
    entries = busy_at_the_fallbacks(run=3600)
    assert judged(entries) == {
        "label": "paid_off",
        "reason": "at the times jobs fell back, the first choice would have taken more than 5m00s in most (0 seen "
        "free, 2 seen busy, from nightly.fine_tune); the fallback pays off if the first choice would have stayed "
        "unavailable for more than 5m00s; cost not judged (no known price on one side, or plan-backed)",
        "first_choice_run": 3600.0,
        "break_even": 300.0,
        "sooner_seconds": None,
        "sooner_at_least": 0.0,
        "premium": None,
    }


# -- the cost rule at its edges ------------------------------------------------------------------------------------

SOONER = [("a", 0, 7200), ("b", 1, 300), ("c", 1, 200)]  # the fallbacks come ~1h57m sooner


def costed(first: float, fallback: float) -> list[dict[str, Any]]:
    return [
        entry(name, rank, pending=pending, estimated_cost_usd=first if rank == 0 else fallback)
        for name, rank, pending in SOONER
    ]


def test_a_premium_exactly_at_the_bound_is_allowed():
    verdict = judged(costed(1.0, 1.25))
    assert (verdict["label"], verdict["premium"]) == ("paid_off", 0.25)
    assert verdict["reason"].endswith("; a median $1.25 per job, +25% against the first choice's $1.00")


def test_against_a_free_first_choice_only_a_free_fallback_is_affordable():
    free = judged(costed(0.0, 0.0))
    assert (free["label"], free["premium"]) == ("paid_off", None)
    assert free["reason"].endswith("; a median $0.00 per job against the first choice's $0.00")
    dearer = judged(costed(0.0, 5.0))
    assert (dearer["label"], dearer["premium"]) == ("did_not_pay_off", None)
    assert (dearer["first_choice_run"], dearer["break_even"], dearer["sooner_seconds"]) == (3600.0, 200.0, 7000.0)
    assert report.verdict(costed(0.0, 5.0)).estimate is not None  # type: ignore[arg-type]
    assert dearer["reason"].endswith(
        ", but at a median $5.00 per job against the first choice's $0.00: above the 25% premium allowed"
    )


# -- a fallback that fails on its hardware --------------------------------------------------------------------------


def test_a_fallback_failing_on_its_hardware_no_more_often_than_the_first_choice_is_not_blamed():
    entries = [
        entry("a", 0),
        entry("b", 0, outcome="failed_after_start", failure_reason=CUDA),
        entry("c", 1),
        entry("d", 1, outcome="failed_after_start", failure_reason=CUDA),
    ]
    assert judged(entries)["label"] != "incompatible_fallback"
    worse_first = [*entries[:2], entry("e", 0, outcome="failed_after_start", failure_reason=CUDA), *entries[2:]]
    assert judged(worse_first)["label"] != "incompatible_fallback"


def test_the_fallback_failing_most_often_on_its_hardware_is_the_one_named():
    """Two of four jobs on the second choice failed on its hardware, the only job on the third choice did too."""
    failed = {"outcome": "failed_after_start", "failure_reason": CUDA}
    entries = [
        entry("a", 0),
        entry("b", 1, **failed),
        entry("c", 1, **failed),
        entry("d", 1),
        entry("e", 1),
        third_choice("f", **failed),
    ]
    verdict = judged(entries)
    assert verdict["label"] == "incompatible_fallback"
    assert verdict["reason"] == (
        "4 x ml.g5.48xlarge (#3) failed on its hardware in 1 of 1 job; the first choice in 0 of 1"
    )
    (row,) = report.summarize(entries)
    assert row["summary"] == "fell back in 5 of 6 jobs: 4 x ml.g5.48xlarge (#3) failed on its hardware in 1 of 1 job"


def test_the_causes_given_are_the_ones_judged():
    """``summarize`` reads each job's cause once and hands it on: the verdict judges those, not its own reading."""
    entries = [entry("a", 0), entry("b", 0), entry("c", 1, outcome="failed_after_start", failure_reason=CODE)]
    entries.append(entry("d", 1))
    assert judged(entries)["label"] != "incompatible_fallback"
    given = {"a": None, "b": None, "c": "hardware", "d": None}
    assert judged(entries, causes=given)["label"] == "incompatible_fallback"


# -- the lead: every cause in its words, in its order ---------------------------------------------------------------


def test_the_lead_names_every_cause_in_its_words_after_the_jobs_that_got_no_capacity():
    failed = "failed_after_start"
    entries = [
        entry("a", 0),
        entry("b", 1),
        entry("c", 1),
        entry("d", 1, outcome=failed, failure_reason=CODE),
        entry("e", 0, outcome=failed, failure_reason=SERVICE),
        entry("f", 1, outcome=failed, failure_reason=None),
        entry("g", 1, outcome=failed, failure_reason=NO_BUCKET),
        entry("h", None, outcome="no_capacity"),
    ]
    (row,) = report.summarize(entries)
    assert row["summary"].split("; ")[1:] == [
        "1 job got no capacity",
        "1 job failed on the request itself (ClientError: Artifact upload failed: the bucket 'bucket' does not exist "
        "(output 'model', s3://bucket/out).)",
        "1 job failed in the code (AlgorithmError: the training script raised KeyError: 'label' (exit code 1))",
        "1 job failed in SageMaker itself (InternalServerError: We encountered an internal error. Please try again.)",
        "1 job failed for no known reason",
    ]
    assert (row["completed"], row["failed_after_start"], row["no_capacity"], row["stopped"]) == (3, 4, 1, 0)


def test_the_lead_quotes_the_latest_dated_reason_and_a_reason_of_exactly_the_limit_whole():
    limit = "AlgorithmError: " + "x" * (report.LEAD_REASON_CHARACTERS - len("AlgorithmError: "))
    failed = "failed_after_start"
    entries = [
        entry("a", 0),
        entry("b", 1),
        entry("c", 1, outcome=failed, failure_reason="AlgorithmError: undated (exit code 1)", created=None),
        entry("d", 1, outcome=failed, failure_reason=limit, created=NIGHTS[5]),
    ]
    (row,) = report.summarize(entries)
    assert row["summary"].endswith(f"; 2 jobs failed in the code ({limit})")


def test_a_task_whose_jobs_all_got_no_capacity_says_so_without_a_rate():
    (row,) = report.summarize([entry("x", None, outcome="no_capacity"), entry("y", None, outcome="no_capacity")])
    assert row["summary"] == "no job got capacity in 2 jobs; 2 jobs got no capacity"
    assert (row["fallback_rate"], row["rank_counts"], row["configurations"]) == (None, {}, [])


def test_an_unknown_median_reads_as_unknown():
    assert (report.median_text(None), report.median_text(90.0)) == ("unknown", "1m30s")


# -- a row's figures -----------------------------------------------------------------------------------------------


def test_a_rows_figures_count_each_outcome_and_the_pending_percentiles():
    pending = [60.0, 120.0, 180.0, 240.0, 3000.0]
    outcomes = ["completed", "completed", "stopped", "failed_after_start", "completed"]
    entries = [
        entry(str(n), n % 2, pending=seconds, outcome=outcome, run_id=f"scheduled__{n // 3}")
        for n, (seconds, outcome) in enumerate(zip(pending, outcomes, strict=True))
    ]
    (row,) = report.summarize(entries)
    assert (row["completed"], row["stopped"], row["failed_after_start"], row["no_capacity"]) == (3, 1, 1, 0)
    assert (row["pending_seconds_p50"], row["pending_seconds_p90"]) == (180.0, 3000.0)
    assert row["recurring"] is True, "two DAG runs are a recurring task"


def test_a_configuration_shows_time_to_result_of_completed_jobs_only():
    failed_late = entry("f", 1, outcome="failed_after_start", pending=10, run=50, failure_reason=CODE)
    (row,) = report.summarize([entry("a", 0), entry("b", 1, pending=100, run=1000), failed_late])
    second = next(c for c in row["configurations"] if c["rank"] == 1)
    assert (second["time_to_result_seconds_p50"], second["run_seconds_p50"]) == (1100.0, 50.0)


def test_a_configuration_outside_the_list_is_shown_last_with_no_rank():
    outside = {**entry("z", 0), "selected_rank": None, "selected_instance_type": "ml.p4de.24xlarge"}
    outside["selected_instance_count"] = 1
    (row,) = report.summarize([entry("a", 0), entry("b", 1), outside])
    assert [(c["preference"], c["instance_type"]) for c in row["configurations"]] == [
        ("#1", "ml.p5.48xlarge"),
        ("#2", "ml.p4d.24xlarge"),
        ("-", "ml.p4de.24xlarge"),
    ]


def test_the_latest_benchmark_is_the_one_compared_and_a_drift_exactly_at_the_tolerance_is_none():
    runs = [
        entry("b", 0, run=4500, created=NIGHTS[2], certified_run_seconds=3600),
        entry("a", 0, run=4500, created=NIGHTS[1], certified_run_seconds=1000),
        entry("u", 0, run=4500, created=None, certified_run_seconds=2000),
    ]
    (row,) = report.summarize(runs)
    (first,) = row["configurations"]
    assert (first["certified_run_seconds"], first["run_time_vs_certified_p50"], first["drifted"]) == (3600, 1.25, False)


def test_utilization_is_the_median_of_the_jobs_own_figures_per_metric():
    def used(gpu_mean: float, gpu_p90: float) -> dict[str, Any]:
        return {"gpu": {"mean": gpu_mean, "p90": gpu_p90}, "cpu": None}

    group = [
        entry("a", 0, utilization=used(10.0, 20.0)),
        entry("b", 0, utilization=used(30.0, 90.0)),
        entry("c", 0, utilization=used(50.0, 40.0)),
        entry("d", 0),
    ]
    (row,) = report.summarize(group)
    (first,) = row["configurations"]
    assert first["utilization_jobs"] == 3
    assert first["utilization"] == {
        "gpu": {"mean": 30.0, "p90": 40.0},
        "gpu_memory": None,
        "cpu": None,
        "memory": None,
    }


def test_a_job_created_at_the_windows_first_moment_is_in_it():
    since = pendulum.parse(NIGHTS[2])
    rows = report.summarize([entry("a", 0, created=NIGHTS[1]), entry("b", 0, created=NIGHTS[2])], since=since)
    assert [row["runs"] for row in rows] == [1]


def test_the_evidence_names_every_task_it_came_from():
    """The first choice's wait at the fallbacks' times, seen by another task of the account too: both are named."""
    entries = [entry("a", 0, pending=7200), entry("b", 1, pending=300), entry("c", 1, pending=200)]
    other = entry("o", 0, pending=3600, task_id="other_task")
    (row,) = report.summarize([*entries, other], task_id="fine_tune")
    assert "(2 seen free, 0 seen busy, from nightly.fine_tune, nightly.other_task)" in row["reason"]
