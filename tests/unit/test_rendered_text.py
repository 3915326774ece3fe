"""The commands' text output, whole: each figure's place, width and words pinned for a fixed input (a change
to a column, a rounding or a word fails here, not only in a reader's eyes)."""

from __future__ import annotations

import json

from airflow_sm_prefs.analysis import advisor, plan_advice, weather

ADVICE = {
    "candidates": [
        {
            "candidate": "1 x ml.p5.48xlarge, then 2 x ml.p4d.24xlarge (current)",
            "time_to_result_p50_seconds": 900.0,
            "time_to_result_p90_seconds": None,
            "estimated_cost_usd_p50": 1234.5,
            "better_than_current": False,
            "nights": 4,
            "nights_with_a_result": 3,
            "nights_waiting_past_the_evidence": 1,
            "nights_without_a_run_time": 0,
            "nights_without_evidence": 0,
            "never_seen": [],
        },
        {
            "candidate": "2 x ml.p4d.24xlarge alone",
            "time_to_result_p50_seconds": 600.0,
            "time_to_result_p90_seconds": 3725.0,
            "estimated_cost_usd_p50": None,
            "better_than_current": True,
            "nights": 4,
            "nights_with_a_result": 4,
            "nights_waiting_past_the_evidence": 0,
            "nights_without_a_run_time": 2,
            "nights_without_evidence": 0,
            "never_seen": [],
        },
        {
            "candidate": "#3 (4 x ml.g5.48xlarge) first",
            "time_to_result_p50_seconds": None,
            "time_to_result_p90_seconds": None,
            "estimated_cost_usd_p50": None,
            "better_than_current": False,
            "nights": 4,
            "nights_with_a_result": 0,
            "nights_waiting_past_the_evidence": 0,
            "nights_without_a_run_time": 0,
            "nights_without_evidence": 4,
            "never_seen": ["4 x ml.g5.48xlarge"],
        },
    ]
}

ROWS = [
    {
        "region": "us-east-1",
        "instance_count": 2,
        "instance_type": "ml.p4d.24xlarge",
        "jobs": 5,
        "cells": [
            {"hour_of_week": 2, "got_it_within_15m_share": 0.0},
            {"hour_of_week": 29, "got_it_within_15m_share": 0.2},
            {"hour_of_week": 71, "got_it_within_15m_share": 0.59},
            {"hour_of_week": 144, "got_it_within_15m_share": 0.79},
            {"hour_of_week": 167, "got_it_within_15m_share": 1.0},
        ],
    }
]

GROUP = {
    "first_choice": "1 x ml.p5.48xlarge",
    "region": "us-east-1",
    "tasks": ["nightly.fine_tune", "team_b.pretrain"],
    "verdict": "do not reserve",
    "in_words": "a plan would not pay",
    "evidence_jobs": 9,
    "jobs_per_day": 2.25,
    "window_days": 7.0,
    "jobs_in_window": 16,
    "options": [
        {
            "option": "keep the list (fall back)",
            "time_to_result_p50_seconds": 320.0,
            "time_to_result_p90_seconds": None,
            "expected_cost_usd": 176.99,
        },
        {
            "option": "reserve tpo-2cf0ca85f8aaaa24a32ca89f and a very long label that is cut",
            "time_to_result_p50_seconds": 320.0,
            "time_to_result_p90_seconds": 4000.0,
            "expected_cost_usd": None,
        },
    ],
}


def test_the_advice_table():
    assert advisor.render(ADVICE, "table") == (
        "candidate                                            result p50        p90   cost p50          evidence\n"
        "-------------------------------------------------------------------------------------------------------\n"
        "1 x ml.p5.48xlarge, then 2 x ml.p4d.24xlarge (curren     15m00s    unknown  $1,234.50          3 of 4 nights replayed with a result, 1 waiting past the evidence\n"  # noqa: E501
        "2 x ml.p4d.24xlarge alone                                10m00s   1h02m05s    unknown  better  4 of 4 nights replayed with a result, 0 waiting past the evidence, 2 with no run time known\n"  # noqa: E501
        "#3 (4 x ml.g5.48xlarge) first                           unknown    unknown    unknown          0 of 4 nights replayed with a result, 0 waiting past the evidence, 4 not replayable (no job ever saw 4 x ml.g5.48xlarge)"  # noqa: E501
    )
    assert json.loads(advisor.render(ADVICE, "json")) == ADVICE
    assert advisor.render({"candidates": [], "note": "no job of this task ended"}, "table") == (
        "No advice: no job of this task ended."
    )
    assert advisor.render({"candidates": []}, "table") == "No advice: no history."


def test_the_weather_chart():
    assert weather.render(ROWS, "table") == (
        "Share of jobs that got the configuration within 15 minutes, by UTC hour of the week: · under 20 %, ░ 20-40 %, ▒ 40-60 %, ▓ 60-80 %, █ 80 % or more, blank: no job then.\n"  # noqa: E501
        "\n"
        "us-east-1  2 x ml.p4d.24xlarge  (5 job(s))\n"
        "     0  3  6  9  12 15 18 21\n"
        "Mon    ·                     \n"
        "Tue       ░                  \n"
        "Wed                         ▒\n"
        "Thu                          \n"
        "Fri                          \n"
        "Sat                          \n"
        "Sun  ▓                      █"
    )
    assert json.loads(weather.render(ROWS, "json")) == ROWS
    assert weather.render([], "table") == "No job in the capacity ledger listed a configuration with a count."


def test_the_plan_advice():
    groups = [GROUP, {**GROUP, "region": None, "tasks": ["a.b"], "verdict": "no offering"}]
    assert plan_advice.render(groups, "table") == (
        "1 x ml.p5.48xlarge in us-east-1 (nightly.fine_tune, team_b.pretrain): do not reserve\n"
        "  a plan would not pay\n"
        "  evidence: 9 jobs, 2.25 a day; window 7 days, 16 jobs\n"
        "  keep the list (fall back)                        result p50      5m20s  p90    unknown  cost      $176.99\n"
        "  reserve tpo-2cf0ca85f8aaaa24a32ca89f and a very  result p50      5m20s  p90   1h06m40s  cost      unknown\n"
        "\n"
        "1 x ml.p5.48xlarge in an unknown Region (a.b): no offering\n"
        "  a plan would not pay\n"
        "  evidence: 9 jobs, 2.25 a day; window 7 days, 16 jobs\n"
        "  keep the list (fall back)                        result p50      5m20s  p90    unknown  cost      $176.99\n"
        "  reserve tpo-2cf0ca85f8aaaa24a32ca89f and a very  result p50      5m20s  p90   1h06m40s  cost      unknown\n"
        "\n"
        "Offerings change by the hour and are bought only by `airflow-sm-prefs plans reserve OFFERING_ID --max-usd N`; a job outside the plan's window or instances runs on demand."  # noqa: E501
    )
    assert json.loads(plan_advice.render(groups, "json")) == groups
    assert plan_advice.render([], "table") == "No training jobs in the capacity ledger to advise on."
