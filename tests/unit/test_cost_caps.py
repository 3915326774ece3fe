"""The cost caps' arithmetic and words: an entry's hourly price times its count against ``max_hourly_cost_usd``,
that over ``MaxRuntimeInSeconds`` against ``max_cost_usd``, a missing price objected to, each boundary pinned."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_sm_prefs.preflight.cost_caps import CostCaps, WithinCostCaps, cost_violations
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.request.preferences import RequestValidationError
from tests.unit.test_prices import table

PRICED = prices.parse(
    table({"us-east-1": {"training": {"ml.p5.48xlarge": 100, "ml.p4d.24xlarge": 12.5}, "processing": {}}}), "t"
)


def _request(runtime: int = 7200, *entries: tuple[str, int]) -> dict[str, Any]:
    listed = entries or (("ml.p5.48xlarge", 2), ("ml.p4d.24xlarge", 2))
    return {
        "ResourceConfig": {"InstancePreferences": [{"InstanceType": t, "InstanceCount": n} for t, n in listed]},
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime},
    }


def test_no_cap_checks_nothing_not_even_a_missing_price():
    unpriced = _request(3600, ("ml.g5.48xlarge", 1))
    assert CostCaps().any is False
    assert cost_violations(TRAINING, unpriced, CostCaps(), table=PRICED, region="us-east-1") == {}


def test_the_hourly_cap_is_the_price_times_the_count_and_a_price_at_the_cap_passes():
    found = cost_violations(TRAINING, _request(), CostCaps(max_hourly_cost_usd=25.0), table=PRICED, region="us-east-1")
    assert found == {
        0: "preference #1 (2 x ml.p5.48xlarge): costs $200.00 an hour ($100 x 2), above max_hourly_cost_usd=$25.00"
    }, "2 x $12.50 is exactly the cap: not above it"
    assert CostCaps(max_hourly_cost_usd=25.0).any
    below = cost_violations(TRAINING, _request(), CostCaps(max_hourly_cost_usd=24.99), table=PRICED, region="us-east-1")
    assert set(below) == {0, 1}


def test_the_total_cap_is_the_hourly_cost_over_the_longest_run_allowed():
    caps = CostCaps(max_cost_usd=50.0)
    assert caps.any
    found = cost_violations(TRAINING, _request(7200), caps, table=PRICED, region="us-east-1")
    assert found == {
        0: "preference #1 (2 x ml.p5.48xlarge): may cost $400.00 ($200.00 an hour for MaxRuntimeInSeconds=7200), "
        "above max_cost_usd=$50.00"
    }, "2 x $12.50 for 2 hours is exactly $50: not above it"
    assert set(cost_violations(TRAINING, _request(7201), caps, table=PRICED, region="us-east-1")) == {0, 1}


def test_the_hourly_reason_is_given_first_when_both_caps_are_passed():
    caps = CostCaps(max_hourly_cost_usd=1.0, max_cost_usd=1.0)
    found = cost_violations(TRAINING, _request(), caps, table=PRICED, region="us-east-1")
    assert all("max_hourly_cost_usd" in reason and "max_cost_usd" not in reason for reason in found.values())


@pytest.mark.parametrize(("region", "kind"), [("eu-west-1", TRAINING), (None, TRAINING), ("us-east-1", PROCESSING)])
def test_an_entry_without_a_price_cannot_be_checked_and_is_objected_to(region, kind):
    request = {
        "ResourceConfig": {"InstancePreferences": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]},
        "ProcessingResources": {
            "ClusterConfig": {"InstancePreferences": [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]}
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }
    found = cost_violations(kind, request, CostCaps(max_cost_usd=1000.0), table=PRICED, region=region)
    assert found == {
        0: f"preference #1 (1 x ml.p4d.24xlarge): no on-demand price for ml.p4d.24xlarge ({kind.name}) in {region} "
        "in the price table, so its cost cannot be checked against the cap; run `airflow-sm-prefs prices refresh` "
        "or add it to your table ([sm_prefs] price_table)"
    }


def test_an_entry_backed_by_a_training_plan_is_paid_for_by_the_plan_and_never_objected_to():
    request = _request(7200, ("ml.p5.48xlarge", 2), ("ml.p4d.24xlarge", 2))
    request["ResourceConfig"]["InstancePreferences"][0]["TrainingPlanArns"] = ["arn:aws:sagemaker:::training-plan/p"]
    caps = CostCaps(max_hourly_cost_usd=1.0)
    assert set(cost_violations(TRAINING, request, caps, table=PRICED, region="us-east-1")) == {1}


def test_a_run_shorter_than_an_hour_is_costed_for_its_share_of_the_hour():
    # 2 x $12.50 for half an hour is $12.50: above a $12 cap, under a $13 one (no rounding up to the hour).
    request = _request(1800, ("ml.p4d.24xlarge", 2))
    assert cost_violations(TRAINING, request, CostCaps(max_cost_usd=13.0), table=PRICED, region="us-east-1") == {}
    found = cost_violations(TRAINING, request, CostCaps(max_cost_usd=12.0), table=PRICED, region="us-east-1")
    assert found == {
        0: "preference #1 (2 x ml.p4d.24xlarge): may cost $12.50 ($25.00 an hour for MaxRuntimeInSeconds=1800), "
        "above max_cost_usd=$12.00"
    }


def test_the_caps_are_read_from_the_arguments_as_dollars():
    assert WithinCostCaps.from_arguments(TRAINING, {}) is None
    assert WithinCostCaps.from_arguments(TRAINING, {"max_hourly_cost_usd": None, "max_cost_usd": None}) is None
    assert WithinCostCaps.from_arguments(TRAINING, {"max_hourly_cost_usd": 40}) == WithinCostCaps(CostCaps(40.0))
    # What Jinja renders a number to is a string.
    both = WithinCostCaps.from_arguments(TRAINING, {"max_hourly_cost_usd": "40.5", "max_cost_usd": 1e3})
    assert both == WithinCostCaps(CostCaps(max_hourly_cost_usd=40.5, max_cost_usd=1000.0))
    assert isinstance(both.caps.max_hourly_cost_usd, float) and isinstance(both.caps.max_cost_usd, float)


def test_a_templated_cap_is_left_for_the_run_to_judge():
    templated = {"max_hourly_cost_usd": "{{ params.hourly }}", "max_cost_usd": "{{ params.total }}"}
    assert WithinCostCaps.from_arguments(TRAINING, templated) is None
    half = WithinCostCaps.from_arguments(TRAINING, {"max_hourly_cost_usd": "{{ params.hourly }}", "max_cost_usd": 9})
    assert half == WithinCostCaps(CostCaps(max_cost_usd=9.0))


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0"),
        (-3, "-3"),
        (True, "True"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
        ("nan", "nan"),  # a string read as a number first
        ("soon", "'soon'"),
        ([5], "[5]"),
        ("x" * 80, repr("x" * 80)[:60]),
    ],
)
def test_a_cap_that_is_not_a_positive_number_of_dollars_is_refused_naming_it(value, shown):
    with pytest.raises(RequestValidationError) as refused:
        WithinCostCaps.from_arguments(TRAINING, {"max_cost_usd": value})
    assert refused.value.problems == [f"max_cost_usd must be a positive number of US dollars, got {shown}"]


def test_both_caps_wrong_are_both_named_in_one_refusal():
    with pytest.raises(RequestValidationError) as refused:
        WithinCostCaps.from_arguments(TRAINING, {"max_hourly_cost_usd": "cheap", "max_cost_usd": -1})
    assert refused.value.problems == [
        "max_hourly_cost_usd must be a positive number of US dollars, got 'cheap'",
        "max_cost_usd must be a positive number of US dollars, got -1",
    ]


def test_the_check_reads_the_price_table_and_the_accounts_region(monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setattr(prices, "current", lambda: PRICED)
    run = SimpleNamespace(kind=TRAINING, account=SimpleNamespace(region="us-east-1"))
    check = WithinCostCaps(CostCaps(max_hourly_cost_usd=25.0))
    assert set(check.violations(run, _request())) == {0}
    elsewhere = SimpleNamespace(kind=TRAINING, account=SimpleNamespace(region="eu-west-1"))
    assert "no on-demand price" in check.violations(elsewhere, _request())[0]


def test_an_unpriced_entry_does_not_keep_the_entries_after_it_from_being_checked():
    request = _request(3600, ("ml.g5.48xlarge", 1), ("ml.p5.48xlarge", 1))
    found = cost_violations(TRAINING, request, CostCaps(max_hourly_cost_usd=50.0), table=PRICED, region="us-east-1")
    assert set(found) == {0, 1} and "no on-demand price" in found[0] and "$100.00 an hour" in found[1]


def test_a_cap_under_a_dollar_is_a_cap():
    small = {"max_hourly_cost_usd": 0.25, "max_cost_usd": "1"}
    assert WithinCostCaps.from_arguments(TRAINING, small) == WithinCostCaps(CostCaps(0.25, 1.0))
