"""JobFacts: each fact of an ended (or abandoned) job computed once, by one rule, for every projection."""

from __future__ import annotations

import datetime as dt

import pendulum

from airflow_sm_prefs.evidence import ledger_entry
from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.reference.prices import HourlyPrice, PriceSource, PriceTable
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from tests.unit.test_record import T0, training_description

ODD = dt.timedelta(seconds=600, microseconds=123456)  # shows the rounding to the millisecond
TABLE = PriceTable({("us-east-1", "training", "ml.p4d.24xlarge"): HourlyPrice(36.0, PriceSource("a test", None))})


def test_billed_instance_seconds_are_sagemakers_billable_time_when_it_reports_one():
    facts = JobFacts.of(
        JobView.parse(TRAINING, training_description(BillableTimeInSeconds=500)), "us-east-1", prices=TABLE
    )
    assert facts.run_seconds == 600.0, "the run lasted longer than SageMaker billed"
    assert facts.billable_instance_seconds == 1000.0  # 500 s x 2 instances
    assert (facts.estimated_cost_usd, facts.cost_basis) == (10.0, "on-demand")  # 1,000 s x $36 an hour


def test_without_billable_time_the_run_time_is_billed_and_seconds_keep_three_decimals():
    description = training_description(TrainingEndTime=T0 + dt.timedelta(seconds=700) + ODD)
    del description["BillableTimeInSeconds"]
    facts = JobFacts.of(JobView.parse(TRAINING, description), "us-east-1", prices=TABLE)
    assert facts.run_seconds == 600.123
    assert facts.billable_instance_seconds == 1200.247  # 600.123456 x 2, rounded once
    assert facts.pending_seconds == 640.0


def test_a_job_still_running_is_measured_at_the_moment_given():
    description = training_description(TrainingJobStatus="InProgress", SecondaryStatus="Training")
    for ended in ("TrainingEndTime", "BillableTimeInSeconds"):
        del description[ended]
    now = pendulum.instance(T0).add(seconds=700) + ODD
    facts = JobFacts.of(JobView.parse(TRAINING, description), "us-east-1", prices=TABLE, now=now)
    assert (facts.run_seconds, facts.billable_instance_seconds) == (600.123, 1200.247)


def test_the_prices_given_are_the_ones_used_and_the_benchmark_reaches_every_projection():
    view = JobView.parse(TRAINING, training_description())
    assert JobFacts.of(view, "us-east-1", prices=PriceTable()).cost_basis == "unknown-price"
    facts = JobFacts.of(view, "us-east-1", prices=TABLE, certified_run_seconds=300.0)
    assert facts.estimated_cost_usd == 12.0  # 600 s x 2 x $36 an hour
    built = record.build(facts)
    assert (built["certified_run_seconds"], built["run_time_vs_certified"]) == (300.0, 2.0)
    entry = ledger_entry.entry_for(facts, dag_id="d", task_id="t", run_id="r", map_index=-1)
    assert (entry["billable_instance_seconds"], entry["estimated_cost_usd"]) == (1200.0, 12.0)


def test_the_ledger_entry_is_a_projection_of_the_facts_with_nothing_assigned_after():
    """The workload, its benchmark and how the job ended come from the facts into the entry, as they are."""
    view = JobView.parse(TRAINING, training_description())
    plain = ledger_entry.entry_for(
        JobFacts.of(view, "us-east-1", prices=TABLE), dag_id="d", task_id="t", run_id="r", map_index=-1
    )
    assert (plain["outcome"], plain["workload"], plain["certified_run_seconds"]) == ("completed", None, None)
    facts = JobFacts.of(
        view, "us-east-1", prices=TABLE, certified_run_seconds=300.0, workload="llm-eval", task_gave_up=True
    )
    entry = ledger_entry.entry_for(facts, dag_id="d", task_id="t", run_id="r", map_index=-1)
    assert (entry["outcome"], entry["workload"], entry["certified_run_seconds"]) == ("stopped", "llm-eval", 300.0)
    assert facts.outcome == "stopped" and record.build(facts)["certified_run_seconds"] == 300.0
