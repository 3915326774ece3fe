"""What a plan bought, on a synthetic ledger: instance-hours held against used, jobs served, their wait against
the first choice's, an idle plan said plainly, and a plan not started yet."""

from __future__ import annotations

import datetime as dt

from airflow_sm_prefs.analysis import plan_usage
from airflow_sm_prefs.sagemaker.training_plans import PlanState
from tests.unit.test_plan_advice import P5, START, _night

NOW = START + dt.timedelta(days=12)
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/"


def _plan(name: str, start: dt.datetime, days: int = 3, total: int = 2) -> PlanState:
    end = start + dt.timedelta(days=days)
    return PlanState(ARN + name, name, "Active", P5, total, total, 0, start, end, 500.0, "USD")


def _on_plan(index: int, name: str) -> dict:
    """A night whose job ran on the plan: its first entry named it and was chosen at once."""
    night = _night(index, sold_out=False)
    preferences = [{**night["preferences"][0], "TrainingPlanArns": [ARN + name]}, night["preferences"][1]]
    return {**night, "preferences": preferences, "pending_seconds": 5.0}


def test_a_plan_used_by_two_jobs_against_the_first_choices_wait_when_sold_out():
    # Ten nights on demand, every other one sold out (fell back after 300 s); then two nights on the plan.
    entries = [_night(index, sold_out=index % 2 == 0) for index in range(10)]
    entries += [_on_plan(10, "week"), {**_on_plan(11, "week"), "training_plan_arn": ARN + "week"}]
    (row,) = plan_usage.usage(entries, [_plan("week", START + dt.timedelta(days=10))], NOW)
    assert (row["jobs"], row["used_instance_hours"], row["reserved_instance_hours_so_far"]) == (2, 2.0, 96.0)
    assert (row["used_share"], row["wait_p50_seconds"], row["idle"]) == (0.021, 5.0, False)
    assert row["reserved_instance_hours"] == 144.0
    # No other job watched p5 on the nights it fell back: only the task's own room nights say (60 s), biased low.
    assert (row["first_choice_wait_p50_seconds"], row["first_choice_wait_basis"]) == (60.0, "same-task history")
    assert plan_usage.in_words(row) == (
        "week: 2 of 96 instance-hours used (2%) by 2 job(s) of nightly.train; they waited a median 5s, where the "
        "first choice on demand took a median 1m00s on the nights it was sold out (from the tasks' other nights: "
        "biased low)"
    )


def test_an_idle_plan_is_said_plainly_and_one_not_started_holds_nothing():
    entries = [_night(index, sold_out=False) for index in range(3)]
    idle, later = plan_usage.usage(
        entries, [_plan("idle", START + dt.timedelta(days=11)), _plan("later", NOW + dt.timedelta(days=1))], NOW
    )
    assert idle["idle"] and plan_usage.in_words(idle) == (
        "idle sat idle: none of the 48 instance-hours it has held so far was used by a job"
    )
    assert not later["idle"] and plan_usage.in_words(later) == "later is Active: it has held no instance-hours yet"


def test_the_plan_of_a_job_is_its_field_or_its_selected_entrys():
    assert plan_usage.plan_of(_on_plan(0, "p")) == ARN + "p"
    assert plan_usage.plan_of({**_on_plan(0, "p"), "selected_rank": 1}) is None
    assert plan_usage.plan_of({"training_plan_arn": ARN + "x"}) == ARN + "x"
    assert plan_usage.plan_of({"selected_rank": 3, "preferences": []}) is None


def test_the_reports_section_says_what_each_listed_plan_bought_or_where_to_ask():
    entries = [_night(index, sold_out=index % 2 == 0) for index in range(10)]
    entries += [{**_on_plan(10, "week"), "training_plan_arn": ARN + "week"}]
    listed_at = NOW.replace(hour=6, minute=30)
    heading, line = plan_usage.report_section(entries, (listed_at, [_plan("week", START + dt.timedelta(days=10))]))
    assert heading == f"Training plans, as SageMaker listed them at {listed_at:%Y-%m-%d} 06:30 UTC:"
    assert line.startswith("  week: 1 of ") and "by 1 job(s) of nightly.train" in line
    (hint,) = plan_usage.report_section([*entries, _on_plan(11, "other")], None)
    assert hint.startswith("Training plans: 1 job(s) on other; 1 job(s) on week. What each plan held is not known")
    assert plan_usage.report_section(entries[:10], None) == []
    assert plan_usage.report_section(entries[:10], (listed_at, [])) == []
    # A listing kept with no plan in it still leaves the jobs that ran on one said.
    assert plan_usage.report_section(entries, (listed_at, []))[0].startswith("Training plans: 1 job(s) on week.")


def test_a_filtered_report_says_only_the_plans_that_served_its_tasks():
    """A plan another DAG's task used is not idle to a report filtered to one DAG: it is not said at all."""
    entries = [_night(index, sold_out=False) for index in range(3)]
    entries += [{**_on_plan(3, "week"), "training_plan_arn": ARN + "week"}]
    listed = (NOW, [_plan("week", START + dt.timedelta(days=2))])
    assert plan_usage.report_section(entries, listed, tasks={"other_dag.train"}) == []
    heading, line = plan_usage.report_section(entries, listed, tasks={"nightly.train"})
    assert heading.startswith("Training plans, as SageMaker listed them at ")
    assert line.startswith("  week: ") and "by 1 job(s) of nightly.train" in line
