"""The first choice's wait at the times fallbacks happened, and the verdict against it.

The estimator is checked against a textbook Kaplan-Meier answer; the verdict on 30-night histories where the
answer is known because another DAG listed the first choice alone on the same nights.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from airflow_sm_prefs.analysis import counterfactual, report, report_text
from airflow_sm_prefs.analysis.survival import kaplan_meier

# -- Kaplan-Meier: the 6-MP arm of Freireich et al. (1963), as tabulated in Kleinbaum & Klein, "Survival
# Analysis", chapter 2: weeks in remission, "+" censored.
SIX_MP = [
    6,
    6,
    6,
    "6+",
    7,
    "9+",
    10,
    "10+",
    "11+",
    13,
    16,
    "17+",
    "19+",
    "20+",
    22,
    23,
    "25+",
    "32+",
    "32+",
    "34+",
    "35+",
]
SIX_MP_SURVIVAL = {6: 0.8571, 7: 0.8067, 10: 0.7529, 13: 0.6902, 16: 0.6275, 22: 0.5378, 23: 0.4482}


def _points(data: list[Any]) -> list[tuple[float, bool]]:
    return [(float(str(d).rstrip("+")), not str(d).endswith("+")) for d in data]


def test_kaplan_meier_gives_the_textbook_curve():
    curve = kaplan_meier(_points(SIX_MP))
    assert [(at, round(after, 4)) for at, after in curve.steps] == list(SIX_MP_SURVIVAL.items())
    assert (curve.observed, curve.censored, curve.longest) == (9, 12, 35.0)
    assert curve.quantile(0.5) == 23.0, "the textbook median remission"
    assert curve.quantile(0.9) is None, "the curve never falls to 10 %"
    assert curve.survival(5.9) == 1.0 and round(curve.survival(15), 4) == 0.6902
    # The area under the curve to 35 weeks, summed by hand from the table above.
    assert curve.restricted_mean(35.0) == pytest.approx(23.2874, abs=1e-3)
    assert curve.restricted_mean(6.0) == 6.0


def test_an_end_and_a_censoring_at_the_same_time_count_the_end_first():
    curve = kaplan_meier([(10.0, True), (10.0, False), (20.0, True)])
    assert [(at, round(after, 6)) for at, after in curve.steps] == [(10.0, 0.666667), (20.0, 0.0)]


def test_only_censored_points_have_no_quantile_and_no_drop():
    curve = kaplan_meier([(5.0, False), (9.0, False)])
    assert (curve.steps, curve.quantile(0.5), curve.longest, curve.restricted_mean(9.0)) == ((), None, 9.0, 9.0)
    empty = kaplan_meier([])
    assert (empty.observed, empty.censored, empty.quantile(0.5), empty.longest) == (0, 0, None, 0.0)


def test_the_curve_at_its_own_steps_and_edges():
    curve = kaplan_meier([(1.0, True), (2.0, True)])
    assert (curve.survival(1.0), curve.survival(0.999)) == (0.5, 1.0), "S drops at the end itself"
    assert curve.quantile(0.5) == 1.0, "half the waits had ended by the first end"
    assert curve.restricted_mean(0.0) == 0.0
    assert curve.restricted_mean(1.0) == 1.0 and curve.restricted_mean(2.0) == 1.5


def test_several_censorings_at_one_moment_all_leave_the_risk_set():
    curve = kaplan_meier([(5.0, False), (5.0, False), (10.0, True), (20.0, True)])
    assert curve.steps == ((10.0, 0.5), (20.0, 0.0))


# -- 30-night histories ----------------------------------------------------------------------------------------

P5, P4D = ("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2)
FIRST = dt.datetime(2026, 10, 1, 2, 0, tzinfo=dt.UTC)


def _job(
    dag: str,
    task: str,
    night: int,
    listed: list[tuple[str, int]],
    rank: int | None,
    pending: float,
    run: float,
    region: str = "us-east-1",
    minutes_late: int = 0,
) -> dict[str, Any]:
    created = FIRST + dt.timedelta(days=night, minutes=minutes_late)
    chosen = listed[rank] if rank is not None else (None, None)
    return {
        "format": 1,
        "dag_id": dag,
        "task_id": task,
        "run_id": f"scheduled__{night}",
        "map_index": -1,
        "job_name": f"{dag}-{task}-{night}",
        "job_arn": f"arn:aws:sagemaker:{region}:123456789012:training-job/{dag}-{task}-{night}",
        "job_kind": "training",
        "region": region,
        "outcome": "completed" if rank is not None else "no_capacity",
        "preferences": [{"InstanceType": t, "InstanceCount": c} for t, c in listed],
        "selected_instance_type": chosen[0],
        "selected_instance_count": chosen[1],
        "selected_rank": rank,
        "plan_backed": False,
        "pending_seconds": pending,
        "run_seconds": run if rank is not None else None,
        "estimated_cost_usd": None,
        "cost_basis": "unknown-price",
        "certified_run_seconds": None,
        "created_at": created.isoformat(),
    }


def _fine_tune(fallback_run: float) -> list[dict[str, Any]]:
    """Half the nights the first choice (1 h runs); the other half an at-once fallback to 2 x p4d."""
    return [
        _job("nightly", "fine_tune", n, [P5, P4D], 1, 0.0, fallback_run)
        if n % 2
        else _job("nightly", "fine_tune", n, [P5, P4D], 0, 60.0, 3600.0)
        for n in range(30)
    ]


def _p5_only(wait_on_fallback_nights: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Another DAG of the account listing ml.p5.48xlarge alone, each night at about the same time."""
    return [
        _job("p5_only", "train", n, [P5], 0, wait_on_fallback_nights(n) if n % 2 else 120.0, 3600.0, **kwargs)
        for n in range(30)
    ]


def _hours_3_to_5(night: int) -> float:
    return 3 * 3600 + (night // 2 % 5) * 1800  # 3 h, 3.5 h, 4 h, 4.5 h, 5 h, three nights each


def _row(entries: list[dict[str, Any]], **filters: Any) -> dict[str, Any]:
    return next(r for r in report.summarize(entries, **filters) if r["task_id"] == "fine_tune")  # type: ignore[arg-type]


def test_a_fallback_that_saved_hours_a_night_paid_off():
    row = _row(_fine_tune(5400.0) + _p5_only(_hours_3_to_5, minutes_late=5))
    assert row["verdict"] == "paid_off", row["reason"]
    wait = row["first_choice_wait"]
    # Counted from each fallback: the other DAG's job began 5 minutes later, and waited 3 to 5 hours.
    assert (wait["basis"], wait["p50_seconds"], wait["p90_seconds"]) == ("same times", 4 * 3600 + 300, 5 * 3600 + 300)
    assert (wait["observed"], wait["censored"]) == (15, 0), "one point per fallback: when the other DAG got p5"
    assert wait["sources"] == ["nightly.fine_tune", "p5_only.train"]
    fallback = next(c for c in row["configurations"] if c["rank"] == 1)
    assert fallback["break_even_wait_seconds"] == 1800.0  # 1.5 h run - 1 h run, after no wait
    first = next(c for c in row["configurations"] if c["rank"] == 0)
    assert first["break_even_wait_seconds"] is None
    assert "first choice would have taken a median 4h05m00s" in row["reason"]
    assert "first choice's wait at the times jobs fell back" in report_text.render([row], "table")


def test_the_evidence_comes_from_every_entry_whatever_the_rows_asked_for():
    entries = _fine_tune(5400.0) + _p5_only(_hours_3_to_5)
    assert _row(entries, dag_id="nightly")["verdict"] == "paid_off"


def test_a_fallback_that_runs_longer_than_the_first_choice_took_to_free_up_did_not_pay_off():
    row = _row(_fine_tune(3 * 3600.0) + _p5_only(lambda night: 300.0))
    assert row["verdict"] == "did_not_pay_off", row["reason"]
    assert row["first_choice_wait"]["p50_seconds"] == 300.0
    assert "free after a median 5m00s" in row["reason"] and "more than 2h00m00s" in row["reason"]


def test_without_evidence_from_the_same_times_the_verdict_is_neither_and_names_the_break_even():
    row = _row(_fine_tune(5400.0))
    assert row["verdict"] == "not_enough_data", row["reason"]
    assert row["reason"].startswith(
        "the fallback pays off if the first choice would have stayed unavailable for more than 30m00s"
    )
    assert "would decide it" in row["reason"]
    assert "other nights" in row["reason"], "the task's own history is named, and why it does not decide"
    assert row["first_choice_wait"]["basis"] == "same-task history"


def test_another_regions_jobs_are_not_evidence():
    row = _row(_fine_tune(5400.0) + _p5_only(_hours_3_to_5, region="eu-west-1"))
    assert row["verdict"] == "not_enough_data"


def test_a_job_that_began_well_after_the_fallback_is_not_the_same_time():
    late = int(counterfactual.SAME_TIME_SECONDS // 60) + 1
    assert _row(_fine_tune(5400.0) + _p5_only(_hours_3_to_5, minutes_late=late))["verdict"] == "not_enough_data"
    on_time = int(counterfactual.SAME_TIME_SECONDS // 60) - 1
    assert _row(_fine_tune(5400.0) + _p5_only(_hours_3_to_5, minutes_late=on_time))["verdict"] == "paid_off"


def test_a_fallback_whose_own_wait_passed_the_break_even_paid_off_on_its_own_evidence():
    """It waited 2 h with the first choice listed and runs shorter than the first choice: whatever else."""
    entries = [_job("nightly", "fine_tune", n, [P5, P4D], 0, 60.0, 3600.0) for n in range(0, 4)]
    entries += [_job("nightly", "fine_tune", n, [P5, P4D], 1, 7200.0, 1800.0) for n in range(4, 8)]
    row = _row(entries)
    assert row["verdict"] == "paid_off", row["reason"]
    assert row["configurations"][1]["break_even_wait_seconds"] == 5400.0


def test_a_task_whose_jobs_got_no_capacity_restricts_the_mean_to_its_pending_limit():
    entries = _fine_tune(5400.0) + _p5_only(_hours_3_to_5)
    entries.append(_job("nightly", "fine_tune", 31, [P5, P4D], None, 6 * 3600.0, 0.0))
    wait = _row(entries)["first_choice_wait"]
    assert wait["restricted_to_seconds"] == 6 * 3600.0
    # 15 waits of 3-5 h (mean 4 h), each counted whole below the 6 h limit.
    assert wait["restricted_mean_seconds"] == pytest.approx(4 * 3600.0, abs=1.0)


def test_namesakes_in_two_regions_are_two_jobs_with_their_own_lists():
    """SageMaker's names are unique per account and Region: the timeline keeps each namesake's own list and
    Region (read once per job, never once per name)."""
    here = {
        "job_name": "nightly",
        "region": "us-east-1",
        "preferences": [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}],
        "created_at": "2026-12-01T02:00:00+00:00",
        "pending_seconds": 60.0,
        "selected_rank": 0,
        "selected_instance_count": 1,
        "dag_id": "a",
        "task_id": "t",
    }
    there = {**here, "region": "eu-west-1", "preferences": [{"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2}]}
    timeline = counterfactual.Timeline([here, there])
    assert timeline.listed_job(here).scope == ("us-east-1", None)
    assert timeline.listed_job(there).scope == ("eu-west-1", None)
    assert timeline.listed_job(there).first_choice == ("ml.g5.48xlarge", 2)
