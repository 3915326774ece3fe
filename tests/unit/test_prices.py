"""The price table: what ships, the user's table over it, estimates, and tables that cannot be read."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import ledger_entry
from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from tests.unit.test_record import training_description


def table(prices_by_region: dict, source: str = "a test's own table", retrieved: str | None = "2026-11-30") -> dict:
    return {"format": 1, "source": source, "retrieved": retrieved, "prices": prices_by_region}


@pytest.fixture
def user_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "prices.json"
    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(path))

    def write(document: dict) -> Path:
        path.write_text(json.dumps(document))
        return path

    return write


def test_the_shipped_table_says_where_prices_come_from_and_invents_none():
    shipped = prices.shipped()
    (source,) = shipped.sources
    assert "Price List" in source.source and source.retrieved is None
    assert shipped.entries == {}  # no AWS price could be retrieved where this release was built


def test_a_job_without_a_known_price_costs_unknown_never_zero():
    view = JobView.parse(TRAINING, training_description())
    built = record.build(JobFacts.of(view, "us-east-1"))
    assert (built["estimated_cost_usd"], built["cost_basis"]) == (None, "unknown-price")


def test_the_users_table_prices_a_training_job_by_its_billable_instance_seconds(user_table):
    user_table(table({"us-east-1": {"training": {"ml.p4d.24xlarge": "40.00"}}}))
    built = record.build(JobFacts.of(JobView.parse(TRAINING, training_description()), "us-east-1"))
    # 600 billable seconds x 2 instances x $40 per instance-hour
    assert (built["estimated_cost_usd"], built["cost_basis"]) == (13.3333, "on-demand")
    assert (
        record.build(JobFacts.of(JobView.parse(TRAINING, training_description()), "eu-west-1"))["estimated_cost_usd"]
        is None
    )


def test_a_processing_job_is_priced_by_its_run_time_for_it_reports_no_billable_time(user_table):
    user_table(table({"us-east-1": {"processing": {"ml.g5.12xlarge": 8}}}))
    started, ended = dt.datetime(2026, 11, 30, 2, 1, tzinfo=dt.UTC), dt.datetime(2026, 11, 30, 2, 31, tzinfo=dt.UTC)
    description = {
        "ProcessingJobName": "prep",
        "ProcessingJobStatus": "Completed",
        "ProcessingResources": {
            "ClusterConfig": {
                "InstancePreferences": [{"InstanceType": "ml.g5.12xlarge", "InstanceCount": 3}],
                "SelectedInstanceType": "ml.g5.12xlarge",
                "SelectedInstanceCount": 3,
            }
        },
        "CreationTime": started,
        "ProcessingStartTime": started,
        "ProcessingEndTime": ended,
        "LastModifiedTime": ended,
    }
    facts = JobFacts.of(JobView.parse(PROCESSING, description), "us-east-1")
    assert facts.cost_basis == "on-demand"
    assert facts.estimated_cost_usd == 12.0  # 30 minutes x 3 instances x $8 per instance-hour
    # One rule for the instance-seconds the cost is computed from, in the record and the ledger alike.
    assert facts.billable_instance_seconds == 5400.0
    built = record.build(facts)
    entry = ledger_entry.entry_for(facts, dag_id="d", task_id="t", run_id="r", map_index=-1)
    for projection in (built, entry):
        assert (projection["billable_instance_seconds"], projection["estimated_cost_usd"]) == (5400.0, 12.0)


def test_a_plan_backed_job_is_never_priced_on_demand(user_table):
    user_table(table({"us-east-1": {"training": {"ml.p5.48xlarge": 100}}}))
    description = training_description()
    description["ResourceConfig"]["InstancePreferences"][1]["TrainingPlanArns"] = ["arn:aws:sagemaker:plan/p"]
    built = record.build(JobFacts.of(JobView.parse(TRAINING, description), "us-east-1"))
    assert (built["estimated_cost_usd"], built["cost_basis"]) == (None, "plan-backed")
    entry = ledger_entry.entry_for(
        JobFacts.of(JobView.parse(TRAINING, description), "us-east-1"),
        dag_id="d",
        task_id="t",
        run_id="r",
        map_index=-1,
    )
    assert entry["plan_backed"] and entry["cost_basis"] == "plan-backed"


def test_a_job_that_never_got_capacity_was_not_billed():
    estimate = prices.estimate(
        prices.shipped(),
        region="us-east-1",
        kind="training",
        instance_type=None,
        instance_seconds=None,
        plan_backed=False,
    )
    assert (estimate.usd, estimate.basis) == (0.0, "not-billed")


def test_the_users_entries_replace_the_shipped_ones_one_by_one():
    base = prices.parse(table({"us-east-1": {"training": {"ml.a": 1, "ml.b": 2}}}, source="base"), "base")
    over = prices.parse(table({"us-east-1": {"training": {"ml.b": 3}}}, source="over"), "over")
    layered = base.layered(over)
    assert layered.hourly("us-east-1", "training", "ml.a").usd == 1
    assert layered.hourly("us-east-1", "training", "ml.b").usd == 3
    assert layered.hourly("us-east-1", "training", "ml.b").origin.source == "over"


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ([], "expected a JSON object"),
        ({**table({}), "format": 2}, "format 2"),
        ({**table({}), "source": ""}, "'source' must say"),
        ({**table({}), "currency": "EUR"}, "only USD"),
        (table({"us-east-1": {"inference": {"ml.a": 1}}}), "prices.us-east-1.inference"),
        (table({"us-east-1": {"training": {"ml.a": -1}}}), "prices.us-east-1.training.ml.a"),
        (table({"us-east-1": {"training": {"ml.a": "NaN"}}}), "prices.us-east-1.training.ml.a"),
        (table({"us-east-1": {"training": {"ml.a": True}}}), "prices.us-east-1.training.ml.a"),
        (table({"us-east-1": {"training": {"ml.a": "cheap"}}}), "prices.us-east-1.training.ml.a"),
        (table({"us-east-1": ["ml.a"]}), "prices.us-east-1 must map"),
    ],
)
def test_a_table_that_cannot_be_read_is_refused_naming_the_entry(document, named):
    with pytest.raises(prices.PriceTableError, match=r"my-table\.json") as refused:
        prices.parse(document, "my-table.json")
    assert named in str(refused.value)


def test_an_unreadable_users_table_is_left_out_with_a_warning(user_table, caplog):
    path = user_table(table({"us-east-1": {"training": {"ml.p4d.24xlarge": -5}}}))
    with caplog.at_level(logging.WARNING):
        current = prices.current()
    assert current.entries == {} and str(path) in caplog.text
