"""``plans advise`` on synthetic ledgers whose right answer is known: a plan that pays, one that does not, one
the evidence cannot settle, too little evidence, and a fallback as cheap as the first choice."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from airflow_sm_prefs.analysis import plan_advice
from airflow_sm_prefs.sagemaker.training_plans import Offering

P5, P4D = "ml.p5.48xlarge", "ml.p4d.24xlarge"
START = dt.datetime(2026, 11, 1, 21, 0, tzinfo=dt.UTC)


def _night(index: int, sold_out: bool, first_cost: float = 100.0, fallback_cost: float = 160.0) -> dict:
    """One nightly job: on room nights 1 x p5 at once for an hour; on sold-out nights 2 x p4d for two hours."""
    return {
        "dag_id": "nightly",
        "task_id": "train",
        "job_name": f"train-{index}",
        "job_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/train-{index}",
        "job_kind": "training",
        "region": "us-east-1",
        "outcome": "completed",
        "preferences": [{"InstanceType": P5, "InstanceCount": 1}, {"InstanceType": P4D, "InstanceCount": 2}],
        "selected_instance_type": P4D if sold_out else P5,
        "selected_instance_count": 2 if sold_out else 1,
        "selected_rank": 1 if sold_out else 0,
        "pending_seconds": 300.0 if sold_out else 60.0,
        "run_seconds": 7200.0 if sold_out else 3600.0,
        "estimated_cost_usd": fallback_cost if sold_out else first_cost,
        "created_at": (START + dt.timedelta(days=index)).isoformat(),
    }


def _ledger(nights: int, sold_out: int, **costs: float) -> list[dict]:
    return [_night(index, index < sold_out, **costs) for index in range(nights)]


def _offering(fee: float | None, days: int = 7) -> Offering:
    start = START + dt.timedelta(days=30)
    return Offering("tpo-week", P5, 1, start, start + dt.timedelta(days=days), days * 24.0, fee, "USD")


def _advice(entries: list[dict], offering: Offering | None, value_per_hour: float = 0.0) -> dict:
    (group,) = plan_advice.advise(entries, lambda *_: [offering] if offering else [], value_per_hour=value_per_hour)
    return group


def test_a_fee_in_another_currency_or_none_is_an_unknown_cost_never_dollars():
    """¥100 is not $100: the package converts nothing, so no verdict is weighed from such a fee."""
    import dataclasses

    for currency in ("JPY", "EUR", "", None):
        offering = dataclasses.replace(_offering(100.0), currency=currency)
        group = _advice(_ledger(10, 8), offering)
        assert (group["verdict"], group["break_even_share"]) == ("unknown cost", None), currency
        reserve = group["options"][-1]
        assert reserve["option"] == "reserve tpo-week" and reserve["expected_cost_usd"] is None, currency
    assert _advice(_ledger(10, 8), _offering(100.0))["verdict"] == "reserve", "the same fee in dollars"


def test_a_plan_that_pays():
    # 7 jobs in the window, fee $910: $130 a job. A room night costs $100, a sold-out one $160: p* = 30 / 60 = 0.5.
    # 8 of 10 nights sold out: the 90 % interval (0.54, 0.93) lies above it.
    group = _advice(_ledger(10, 8), _offering(910.0))
    assert (group["jobs_in_window"], group["break_even_share"], group["verdict"]) == (7, 0.5, "reserve")
    assert group["sold_out_share_90"] == [0.541, 0.931]
    assert group["in_words"].startswith(f"a plan pays if {P5} stays sold out on more than 5 of 10 nights;")
    keep, wait, reserve = group["options"]
    assert keep["expected_cost_usd"] == 7 * (0.2 * 100 + 0.8 * 160)
    assert wait["expected_cost_usd"] == 700.0 and reserve["expected_cost_usd"] == 910.0
    assert reserve["time_to_result_p50_seconds"] == 3600.0  # the first choice's run, no wait
    assert keep["time_to_result_p50_seconds"] == 7500.0 and keep["time_to_result_p90_seconds"] == 7500.0


def test_a_plan_that_does_not_pay():
    group = _advice(_ledger(10, 1), _offering(910.0))
    assert group["verdict"] == "do not reserve" and group["sold_out_share_90"][1] < 0.5


def test_evidence_that_cannot_settle_it():
    group = _advice(_ledger(10, 5), _offering(910.0))
    assert group["verdict"] == "cannot tell"
    assert group["in_words"].endswith("(90 % interval 27% to 73%), which does not settle it yet")


def test_too_little_evidence_says_so():
    group = _advice(_ledger(4, 4), _offering(910.0))
    assert group["verdict"] == "too little evidence"
    assert group["in_words"] == "4 job(s) of evidence; at least 5 are needed to say"


def test_a_fee_no_share_of_sold_out_nights_can_repay():
    group = _advice(_ledger(10, 9), _offering(7 * 170.0))  # $170 a job, more than even a sold-out night
    assert group["verdict"] == "do not reserve" and group["break_even_share"] == pytest.approx(70 / 60, abs=1e-3)
    assert "would not pay even if ml.p5.48xlarge were sold out every night" in group["in_words"]


def test_a_fallback_as_cheap_as_the_first_choice_pays_only_for_time():
    entries = _ledger(10, 8, fallback_cost=100.0)
    group = _advice(entries, _offering(910.0))
    assert group["verdict"] == "do not reserve" and group["break_even_share"] is None
    assert "--value-per-hour" in group["in_words"]
    # At $100 an hour of delay, a sold-out night costs $100 + 100 x (7500 - 3600) / 3600 = $208.33: p* = 0.277.
    priced = _advice(entries, _offering(910.0), value_per_hour=100.0)
    assert priced["break_even_share"] == pytest.approx(30 / (100 * 3900 / 3600), abs=1e-3)
    assert priced["verdict"] == "reserve"


def test_unknown_costs_and_no_offering_are_said():
    assert _advice(_ledger(10, 8), _offering(None))["verdict"] == "unknown cost"
    # Sold out every night: the first choice never ran for this task, so its cost is not known.
    assert _advice(_ledger(10, 10), _offering(910.0))["verdict"] == "unknown cost"
    group = _advice(_ledger(10, 8), None)
    assert (group["verdict"], len(group["options"])) == ("no offering", 2)


def test_the_demand_is_counted_by_hour_of_week_and_jobs_per_day():
    found = plan_advice.demand(_ledger(14, 0), plan_advice.Timeline(_ledger(14, 0)))
    assert found.jobs_per_day == 1.0
    # Every night at 21:00 UTC, one p5 for an hour: two jobs on each weekday's 21st hour in two weeks.
    assert found.instance_hours_by_hour_of_week == {day * 24 + 21: 2.0 for day in range(7)}


def test_a_job_that_waited_long_for_its_first_choice_was_sold_out():
    assert plan_advice.was_sold_out({"selected_rank": 0, "pending_seconds": plan_advice.SOLD_OUT_WAIT + 1})
    assert not plan_advice.was_sold_out({"selected_rank": 0, "pending_seconds": plan_advice.SOLD_OUT_WAIT})
    assert plan_advice.was_sold_out({"selected_rank": None, "pending_seconds": 0.0})


def test_processing_jobs_are_not_advised():
    entries = [{**entry, "job_kind": "processing"} for entry in _ledger(10, 8)]
    assert plan_advice.advise(entries, lambda *_: []) == []


def test_a_group_advised_without_offerings_says_why():
    def refused(*_: object) -> list[Offering]:
        raise plan_advice.NoOfferings("SageMaker reserves training plans of ml.p5.48xlarge only")

    (group,) = plan_advice.advise(_ledger(10, 8), refused)
    assert (group["verdict"], group["in_words"]) == (
        "no offering",
        "SageMaker reserves training plans of ml.p5.48xlarge only",
    )


def test_the_reservable_types_are_the_models():
    from airflow_sm_prefs.sagemaker.training_plans import reservable_types

    types = reservable_types()
    assert types is not None and P5 in types and "ml.g5.48xlarge" not in types


def test_a_list_never_sold_out_costs_the_first_choice_every_night():
    group = _advice(_ledger(10, 0), _offering(910.0))
    keep, wait, _ = group["options"]
    assert keep["expected_cost_usd"] == wait["expected_cost_usd"] == 700.0
    assert group["verdict"] == "unknown cost"  # no night fell back: what a sold-out night costs is not known


def test_every_figure_of_a_group_with_an_hour_of_delay_priced():
    """One group, whole: the window from the offering's hours, the delay priced at $30 an hour, each option."""
    group = _advice(_ledger(10, 8), _offering(280.0, days=2), value_per_hour=30.0)
    # A sold-out night: $160 and, at $30 an hour, its 3,900 s later result (300 s wait + 7,200 s run against the
    # first choice's 3,600 s run): $192.50. The fee per job is $140: p* = (140 - 100) / (192.50 - 100) = 0.432.
    assert group == {
        "first_choice": "1 x ml.p5.48xlarge",
        "region": "us-east-1",
        "tasks": ["nightly.train"],
        "task_keys": [["nightly", "train"]],
        "evidence_jobs": 10,
        "sold_out_jobs": 8,
        "sold_out_share": 0.8,
        "sold_out_share_90": [0.541, 0.931],
        "jobs_per_day": 1.0,
        "instance_hours_by_hour_of_week": {21: 5.0, 45: 5.0, 69: 4.0, 93: 4.0, 117: 4.0, 141: 4.0, 165: 8.0},
        "window_days": 2.0,
        "jobs_in_window": 2,
        "first_choice_cost_usd": 100.0,
        "sold_out_night_cost_usd": 192.5,
        "options": [
            {
                "option": "keep the list (fall back)",
                "time_to_result_p50_seconds": 7500.0,
                "time_to_result_p90_seconds": 7500.0,
                "expected_cost_usd": 348.0,
            },
            {
                # Its wait on the sold-out nights is not known past what the evidence saw: no median to give.
                "option": "wait for 1 x ml.p5.48xlarge alone",
                "time_to_result_p50_seconds": None,
                "time_to_result_p90_seconds": None,
                "expected_cost_usd": 200.0,
            },
            {
                "option": "reserve tpo-week",
                "time_to_result_p50_seconds": 3600.0,
                "time_to_result_p90_seconds": 3600.0,
                "expected_cost_usd": 280.0,
            },
        ],
        "offering": _offering(280.0, days=2).as_dict(),
        "break_even_share": 0.432,
        "verdict": "reserve",
        "in_words": "a plan pays if ml.p5.48xlarge stays sold out on more than 4 of 10 nights; it was sold out on 8 "
        "of 10 jobs (90 % interval 54% to 93%)",
        "other_offerings": [],
    }


def test_a_one_day_window_holds_one_job_and_its_fee_is_not_shared():
    group = _advice(_ledger(10, 8), _offering(280.0, days=1), value_per_hour=30.0)
    assert (group["window_days"], group["jobs_in_window"], group["break_even_share"]) == (1.0, 1, 1.946)
    assert group["verdict"] == "do not reserve"
    assert [option["expected_cost_usd"] for option in group["options"]] == [174.0, 100.0, 280.0]


def test_another_teams_waits_price_the_wait_and_the_cheapest_offering_is_weighed_first():
    """Another DAG lists p5 alone on the same nights: it waited 2 h when the pipeline fell back, a minute
    otherwise. Both share the first choice, so one group; SageMaker's dearer offering is listed, not weighed."""
    from airflow_sm_prefs.sagemaker.training_plans import Offering

    entries = _ledger(6, 3)
    for index in range(6):
        entries.append(
            {
                **_night(index, False),
                "dag_id": "team_b",
                "job_name": f"b-{index}",
                "job_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/b-{index}",
                "preferences": [{"InstanceType": P5, "InstanceCount": 1}],
                "pending_seconds": 7200.0 if index < 3 else 60.0,
            }
        )
    dear = Offering("tpo-dear", P5, 1, None, None, 168.0, 900.0, "USD")
    searched: list[tuple] = []

    def offerings(region, configuration, found):
        searched.append((region, configuration, found.jobs))
        return [dear, _offering(500.0)]

    (group,) = plan_advice.advise(entries, offerings, tasks={"team_b.train"})
    assert searched == [("us-east-1", (P5, 1), 12)]
    assert (group["tasks"], group["evidence_jobs"], group["sold_out_jobs"]) == (
        ["nightly.train", "team_b.train"],
        12,
        6,
    )
    assert [
        (o["option"], o["time_to_result_p50_seconds"], o["time_to_result_p90_seconds"], o["expected_cost_usd"])
        for o in group["options"]
    ] == [
        # 14 jobs in the week, half on sold-out nights: the pipeline's cost $160 (its fallback), team_b's $100 (it
        # waited for p5 and got it); each task is half the jobs, so a sold-out night costs $130 on average.
        ("keep the list (fall back)", 3660.0, 10800.0, 14 * (0.5 * 100 + 0.5 * 130)),
        # The pipeline's sold-out nights, had it waited: team_b's 2 h waits, then the first choice's 1 h run.
        ("wait for 1 x ml.p5.48xlarge alone", 3660.0, 10800.0, 1400.0),
        ("reserve tpo-week", 3600.0, 3600.0, 500.0),
    ]
    assert group["offering"]["offering_id"] == "tpo-week" and group["other_offerings"] == [dear.as_dict()]
    assert plan_advice.advise(entries, offerings, tasks={"nobody.else"}) == []


def test_the_demand_of_one_night_with_a_job_that_got_no_capacity():
    """Three jobs the same night: p5 for an hour, one that waited 30 minutes for nothing, p5 for 1,234.5678 s."""
    nothing = {
        **_night(0, True),
        "job_name": "starved",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/starved",
        "outcome": "no_capacity",
        "selected_instance_type": None,
        "selected_instance_count": None,
        "selected_rank": None,
        "pending_seconds": 1800.0,
        "run_seconds": None,
        "estimated_cost_usd": None,
    }
    short = {
        **_night(0, False),
        "job_name": "short",
        "job_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/short",
        "run_seconds": 1234.5678,
    }
    entries = [_night(0, False), nothing, short]
    assert plan_advice.demand(entries, plan_advice.Timeline(entries)) == plan_advice.Demand(
        region="us-east-1",
        first_choice=(P5, 1),
        tasks=("nightly.train",),
        task_keys=(("nightly", "train"),),
        jobs=3,
        sold_out=1,
        jobs_per_day=3.0,  # one night counts as a day
        # Sunday 21:00 UTC: the two completed runs, 1 h + 0.343 h, to three digits; the starved job used nothing.
        instance_hours_by_hour_of_week={165: 1.343},
        first_run_seconds=(3600.0, 1234.5678),
        finishes=((3660.0, True), (1800.0, False), (1294.5678, True)),
        had_room_finishes=((3660.0, True), (1294.5678, True)),
        first_choice_waits=((1800.0, False),),  # no job was seen getting p5 after it: at least its 30 minutes
        # The starved job fell back to nothing: its work is done another night, on the first choice, after at
        # least its 30 minutes' wait.
        task_costs=(
            plan_advice.TaskCosts(
                task="nightly.train",
                jobs=3,
                first_cost_usd=100.0,
                sold_out_jobs=1,
                fell_back=False,
                fallback_cost_usd=None,
                fallback_delay_seconds=None,
                sold_out_wait_seconds=1800.0,
            ),
        ),
    )


def test_the_verdicts_words_and_boundaries():
    # Five jobs are enough to say (one fewer is not: above).
    assert _advice(_ledger(5, 4), _offering(910.0))["verdict"] != "too little evidence"
    unknown = _advice(_ledger(10, 8), _offering(None))
    assert unknown["in_words"] == (
        "a price is unknown (the offering's fee in US dollars, or the jobs' costs: `airflow-sm-prefs prices`)"
    )
    cheap = _advice(_ledger(10, 8, fallback_cost=100.0), _offering(910.0))
    assert cheap["in_words"] == (
        "a night ml.p5.48xlarge is sold out costs no more than one it has room (the fallback is as cheap), so a "
        "plan pays only for time; give --value-per-hour to price the delay"
    )
    # A fee of exactly a sold-out night per job ($160 x 7): only a list sold out every night would break even.
    even = _advice(_ledger(10, 9), _offering(7 * 160.0))
    assert (even["break_even_share"], even["verdict"]) == (1.0, "do not reserve")
    assert even["in_words"].startswith("a plan would not pay even if ml.p5.48xlarge were sold out every night;")
    # A fee below the first choice's own on-demand cost per job: the plan pays whatever the nights.
    below = _advice(_ledger(10, 1), _offering(7 * 90.0))
    assert below["verdict"] == "reserve"
    assert below["in_words"].startswith("the plan costs less per job than ml.p5.48xlarge on demand;")


def test_the_wilson_interval_at_its_edges():
    assert plan_advice.wilson(0, 0) == (0.0, 1.0), "no evidence: anything"
    low, high = plan_advice.wilson(10, 10)
    assert high == 1.0 and 0.78 < low < 0.79
    low, high = plan_advice.wilson(0, 10)
    assert low == 0.0 and 0.21 < high < 0.22


def test_groups_come_in_region_then_configuration_order_and_a_filter_skips_only_the_others():
    def moved(entries: list[dict], region: str, first: dict) -> list[dict]:
        return [
            {
                **entry,
                "region": region,
                "task_id": f"train_{region}",
                "job_arn": entry["job_arn"].replace("us-east-1", region),
                "preferences": [first, *entry["preferences"][1:]],
            }
            for entry in entries
        ]

    p5_pair = {"InstanceType": P5, "InstanceCount": 2}
    entries = moved(_ledger(6, 0), "us-west-2", p5_pair) + _ledger(6, 0) + moved(_ledger(6, 0), "eu-west-1", p5_pair)
    advised = plan_advice.advise(entries, lambda *_: [])
    assert [(g["region"], g["first_choice"]) for g in advised] == [
        ("eu-west-1", "2 x ml.p5.48xlarge"),
        ("us-east-1", "1 x ml.p5.48xlarge"),
        ("us-west-2", "2 x ml.p5.48xlarge"),
    ]
    assert [g["in_words"] for g in advised] == ["SageMaker offered no plan for this window"] * 3
    only_west = plan_advice.advise(entries, lambda *_: [], tasks={"nightly.train_us-west-2"})
    assert [g["region"] for g in only_west] == ["us-west-2"]


def test_an_offering_without_a_fee_is_weighed_after_those_with_one():
    from airflow_sm_prefs.sagemaker.training_plans import Offering

    unpriced = Offering("tpo-free?", P5, 1, None, None, 168.0, None, None)
    group = _advice_from(_ledger(10, 8), [unpriced, _offering(910.0), _offering(0.0)])
    assert group["offering"]["upfront_fee"] == 0.0
    assert [o["offering_id"] for o in group["other_offerings"]] == ["tpo-week", "tpo-free?"]


def test_of_offerings_with_equal_fees_the_soonest_to_start_is_weighed():
    later = Offering(
        "tpo-a-later", P5, 1, START + dt.timedelta(days=3), START + dt.timedelta(days=10), 168.0, 910.0, "USD"
    )
    sooner = Offering(
        "tpo-b-sooner", P5, 1, START + dt.timedelta(days=1), START + dt.timedelta(days=8), 168.0, 910.0, "USD"
    )
    unscheduled = Offering("tpo-0", P5, 1, None, None, 168.0, 910.0, "USD")
    group = _advice_from(_ledger(10, 8), [later, unscheduled, sooner])
    assert group["offering"]["offering_id"] == "tpo-b-sooner"
    assert [o["offering_id"] for o in group["other_offerings"]] == ["tpo-a-later", "tpo-0"]


def _advice_from(entries: list[dict], offered: list) -> dict:
    (group,) = plan_advice.advise(entries, lambda *_: offered)
    return group


def _day_long(index: int, sold_out: bool) -> dict:
    """Another team's pretraining on p5 alone: 20 h a night ($2,000); on a sold-out night it gives up after an hour."""
    return {
        **_night(index, False),
        "dag_id": "team_b",
        "task_id": "pretrain",
        "job_name": f"pretrain-{index}",
        "job_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/pretrain-{index}",
        "preferences": [{"InstanceType": P5, "InstanceCount": 1}],
        "run_seconds": None if sold_out else 72000.0,
        "estimated_cost_usd": None if sold_out else 2000.0,
        "outcome": "no_capacity" if sold_out else "completed",
        "selected_instance_type": None if sold_out else P5,
        "selected_instance_count": None if sold_out else 1,
        "selected_rank": None if sold_out else 0,
        "pending_seconds": 3600.0 if sold_out else 60.0,
    }


def test_each_task_of_a_group_is_priced_on_its_own_and_weighed_by_its_jobs():
    """A ten-minute nightly job ($10 on p5, $16 on its fallback) and a day-long one ($2,000) share p5, each sold
    out on half its nights. A week's plan for $10,080 costs less than their demand on demand: reserve. One median
    cost for the group would have priced the day-long job like the short one."""
    entries = [_night(index, index % 2 == 1, first_cost=10.0, fallback_cost=16.0) for index in range(8)]
    entries += [_day_long(index, index % 2 == 1) for index in range(8)]
    group = _advice(entries, _offering(10_080.0))
    # 16 jobs in 8 days: 14 in the week. A job on p5: (8 x $10 + 8 x $2,000) / 16 = $1,005. A sold-out night:
    # the nightly job's fallback $16, the pretraining's $2,000 (its work done another night): $1,008.
    assert (group["first_choice_cost_usd"], group["sold_out_night_cost_usd"]) == (1005.0, 1008.0)
    assert group["jobs_in_window"] == 14
    keep, wait, reserve = (option["expected_cost_usd"] for option in group["options"])
    assert (keep, wait, reserve) == (14 * (0.5 * 1005 + 0.5 * 1008), 14 * 1005.0, 10_080.0)
    assert group["break_even_share"] == round((10_080 / 14 - 1005) / (1008 - 1005), 3) < 0
    assert group["verdict"] == "reserve"
    assert group["in_words"].startswith(f"the plan costs less per job than {P5} on demand;")
    # Without the day-long team, the same fee cannot pay: $720 a job against $10 to $16.
    assert _advice(entries[:8], _offering(10_080.0))["verdict"] == "do not reserve"


def test_a_sold_out_night_is_priced_by_what_each_task_did_on_it():
    costs = plan_advice.TaskCosts("t", 4, 100.0, 2, False, None, None, 1800.0)
    # No fallback: the first choice's price, the work done later, and the wait priced at $40 an hour.
    assert (costs.sold_out_cost(0.0), costs.sold_out_cost(40.0)) == (100.0, 120.0)
    fell_back = plan_advice.TaskCosts("t", 4, 100.0, 2, True, 160.0, 3600.0, None)
    assert (fell_back.sold_out_cost(0.0), fell_back.sold_out_cost(40.0)) == (160.0, 200.0)
    assert plan_advice.TaskCosts("t", 4, 100.0, 2, True, None, 3600.0, None).sold_out_cost(0.0) is None
    assert plan_advice.TaskCosts("t", 4, None, 2, False, None, None, 60.0).sold_out_cost(0.0) is None
    assert plan_advice.TaskCosts("t", 4, 100.0, 0, False, None, None, None).sold_out_cost(0.0) is None
    # A task never sold out does not price a sold-out night; one whose sold-out price is unknown leaves it unknown.
    never = plan_advice.TaskCosts("never", 12, 50.0, 0, False, None, None, None)
    unknown = plan_advice.TaskCosts("unknown", 1, 100.0, 1, True, None, None, None)
    group = plan_advice.demand(_ledger(4, 2), plan_advice.Timeline(_ledger(4, 2)))
    assert dataclasses.replace(group, task_costs=(costs, never)).sold_out_cost(0.0) == 100.0
    assert dataclasses.replace(group, task_costs=(costs, never)).first_choice_cost() == (4 * 100 + 12 * 50) / 16
    assert dataclasses.replace(group, task_costs=(costs, unknown)).sold_out_cost(0.0) is None
    assert plan_advice.weighed([]) is None and plan_advice.weighed([(3, None), (1, 8.0)]) == 8.0


def test_a_sold_out_nights_delay_is_priced_only_when_it_is_known():
    fell_back = plan_advice.TaskCosts("nightly.train", 3, 100.0, 1, True, 160.0, None, None)
    assert fell_back.sold_out_cost(36.0) == 160.0, "no delay measured: the fallback's price alone"
    assert dataclasses.replace(fell_back, fallback_delay_seconds=1800.0).sold_out_cost(36.0) == 178.0
    waited = plan_advice.TaskCosts("nightly.train", 3, 100.0, 1, False, None, None, None)
    assert waited.sold_out_cost(36.0) == 100.0, "no wait measured: the first choice's price alone"
    assert dataclasses.replace(waited, sold_out_wait_seconds=3600.0).sold_out_cost(36.0) == 136.0


def _demand(nights: int = 10, sold_out: int = 8) -> plan_advice.Demand:
    entries = _ledger(nights, sold_out)
    (group,) = plan_advice.groups(entries).values()
    return plan_advice.demand(group, plan_advice.Timeline(entries))


def test_a_plan_that_costs_exactly_the_first_choice_per_job_is_worth_reserving():
    assert plan_advice.verdict(_demand(), share_needed=0.0, fee=700.0, first=100.0, sold_out_night=160.0) == (
        "reserve",
        f"the plan costs less per job than {P5} on demand; it was sold out on 8 of 10 jobs (90 % interval 54% to 93%)",
    )


def test_the_json_form_is_indented_and_says_any_value_as_text():
    advice = [{"first_choice": "1 x ml.p5.48xlarge", "start": START}]
    assert plan_advice.render(advice, "json") == (
        '[\n  {\n    "first_choice": "1 x ml.p5.48xlarge",\n    "start": "2026-11-01 21:00:00+00:00"\n  }\n]'
    )


def test_the_break_even_is_said_in_whole_tenths_rounded_down():
    _, words = plan_advice.verdict(_demand(), share_needed=0.95, fee=1.0, first=1.0, sold_out_night=2.0)
    assert words.startswith(f"a plan pays if {P5} stays sold out on more than 9 of 10 nights;")


def test_an_interval_that_only_touches_the_break_even_does_not_settle_it():
    found = _demand()
    low, high = found.sold_out_interval()
    for share_needed in (low, high):
        said, words = plan_advice.verdict(found, share_needed=share_needed, fee=1.0, first=1.0, sold_out_night=2.0)
        assert said == "cannot tell" and words.endswith(", which does not settle it yet"), share_needed


def test_a_free_offering_is_weighed_before_one_that_costs_a_little():
    free, cheap = dataclasses.replace(_offering(0.0), offering_id="free"), _offering(0.5)
    assert sorted([cheap, free], key=plan_advice._weighed_first)[0].offering_id == "free"


def test_without_an_offering_the_options_say_sagemaker_offered_none():
    group = plan_advice.options(_demand(), None, horizon_days=7.0, value_per_hour=0.0)
    assert (group["verdict"], group["in_words"]) == ("no offering", "SageMaker offered no plan for this window")


def test_a_free_fallback_costs_nothing_on_a_sold_out_night():
    group = _advice(_ledger(10, 8, fallback_cost=0.0), _offering(910.0))
    keep = group["options"][0]
    assert keep["expected_cost_usd"] == 7 * (0.2 * 100.0) and group["sold_out_night_cost_usd"] == 0.0


def test_a_task_is_priced_from_its_own_first_choice_runs_and_the_groups_only_without_any():
    own_first, fallback = _night(0, sold_out=False), _night(1, sold_out=True)
    with_own = plan_advice.task_costs([own_first, fallback], group_first_run=100.0)
    assert with_own.fallback_delay_seconds == 300.0 + 7200.0 - 3600.0, "its own first-choice run, not the group's"
    never_first = plan_advice.task_costs([fallback], group_first_run=1800.0)
    assert never_first.task == "nightly.train" and never_first.jobs == 1
    assert never_first.fallback_delay_seconds == 300.0 + 7200.0 - 1800.0, "the group's first-choice run stands in"
    sooner = plan_advice.task_costs([fallback], group_first_run=9000.0)
    assert sooner.fallback_delay_seconds == 0.0, "a fallback done sooner than the first choice's run delays nothing"


def test_only_a_completed_job_with_a_run_time_counts_as_run():
    assert plan_advice._completed({"outcome": "completed", "run_seconds": 60.0})
    assert not plan_advice._completed({"outcome": "failed", "run_seconds": 60.0})
    assert not plan_advice._completed({"outcome": "completed", "run_seconds": None})
