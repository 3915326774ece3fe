"""The Capacity page's charts as geometry (surface/charts.py), and the templates that draw them: every mark's
place, colour and words pinned without a browser."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.surface import charts
from airflow_sm_prefs.surface.page_templates import render


def job(created_at: str | None, pending: float, rank: int | None) -> dict:
    return {"created_at": created_at, "pending_seconds": pending, "selected_rank": rank}


def test_the_wait_chart_spreads_jobs_over_time_and_scales_waits_to_the_longest():
    chart = charts.wait_chart(
        [
            job("2026-11-29T02:00:00+00:00", 0.0, 0),
            job("2026-11-30T02:00:00+00:00", 3600.0, 1),
            job("2026-12-01T02:00:00+00:00", 1800.0, None),
            job(None, 99999.0, 0),  # no creation time: not charted, and not the scale
        ]
    )
    assert chart is not None
    assert [(round(m.x, 1), round(m.y, 1)) for m in chart.marks] == [(60.0, 190.0), (340.0, 20.0), (620.0, 105.0)]
    assert [m.colour for m in chart.marks] == ["#2563eb", "#f59e0b", "#111"]
    assert [m.title for m in chart.marks] == ["#1: 0s", "#2: 1h00m00s", "no capacity: 30m00s"]
    assert chart.longest == "1h00m00s"
    assert chart.legend == (("#2563eb", "#1"), ("#f59e0b", "#2"), ("#111", "no capacity"))
    assert charts.wait_chart([job(None, 5.0, 0)]) is None
    # The legend names the ranks charted, no more: none the list lacks, and a fifth choice when one was taken.
    only_first = charts.wait_chart([job("2026-11-29T02:00:00+00:00", 0.0, 0)])
    assert only_first is not None and only_first.legend == (("#2563eb", "#1"),)
    fifth = charts.wait_chart([job("2026-11-29T02:00:00+00:00", 9.0, 4), job("2026-11-30T02:00:00+00:00", 0.0, 0)])
    assert fifth is not None and fifth.legend == (("#2563eb", "#1"), ("#059669", "#5"))


def test_one_job_or_waits_of_nothing_never_divide_by_zero():
    chart = charts.wait_chart([job("2026-11-29T02:00:00+00:00", 0.0, 6)])
    assert chart is not None
    (mark,) = chart.marks
    assert (mark.x, mark.y, mark.colour) == (60.0, 190.0, charts.RANK_COLOURS[1]), "ranks past the palette wrap"
    assert chart.longest == "1s"


SURVIVAL = {
    "observed": 2,
    "censored": 1,
    "survival": [(600.0, 0.5), (1200.0, 0.25)],
    "longest_seconds": 2000.0,
    "basis": "same times",
    "instance_count": 1,
    "instance_type": "ml.p5.48xlarge",
    "p50_seconds": 600.0,
}


def test_the_survival_chart_steps_down_at_each_seen_wait_and_marks_the_break_even():
    chart = charts.survival_chart(SURVIVAL, 1000.0)
    assert chart is not None
    # 2100 s of horizon (the longest wait and 5 %) over 560 points; shares over 170 points from y=20.
    assert chart.path == "M60.0,20.0H220.0V105.0H380.0V147.5H593.3"
    assert (chart.half_y, round(chart.break_even_x or 0, 1)) == (105.0, 326.7)
    assert (chart.horizon, chart.break_even) == ("35m00s", "16m40s")
    assert chart.caption == (
        "Share of jobs the first choice (1 x ml.p5.48xlarge) would still have kept waiting, at the times jobs fell "
        "back: 2 seen free, 1 seen busy; p50 10m00s, ends at 25% after 33m20s"
    )


def test_a_break_even_past_every_wait_widens_the_survival_chart_and_other_nights_are_said():
    chart = charts.survival_chart({**SURVIVAL, "basis": "other nights"}, 4000.0)
    assert chart is not None
    assert chart.horizon == "1h10m00s" and round(chart.break_even_x or 0, 1) == 593.3
    assert "on this task's other nights" in chart.caption
    assert charts.survival_chart({**SURVIVAL}, None).break_even_x is None  # type: ignore[union-attr]
    assert charts.survival_chart({**SURVIVAL, "observed": 0, "censored": 0}, 10.0) is None
    assert charts.survival_chart(None, 10.0) is None


CONFIGURATIONS = [
    {"rank": 0, "instance_count": 1, "instance_type": "ml.p5.48xlarge", "jobs": 1, "run_seconds_p50": 1000.0,
     "run_time_vs_certified_p50": 1.25, "drifted": False, "estimated_cost_usd_p50": None},
    {"rank": 1, "instance_count": 2, "instance_type": "ml.p4d.24xlarge", "jobs": 3, "run_seconds_p50": 2000.0,
     "run_time_vs_certified_p50": 1.8, "drifted": True, "estimated_cost_usd_p50": 20.0},
    {"rank": None, "instance_count": 4, "instance_type": "ml.g5.48xlarge", "jobs": 2, "run_seconds_p50": None,
     "estimated_cost_usd_p50": 10.0},
]  # fmt: skip


def test_bars_are_as_long_as_their_share_of_the_longest_and_say_the_benchmark_on_run_times_only():
    runs = charts.configuration_chart(CONFIGURATIONS, "run_seconds_p50", "Run", charts.seconds)
    assert runs is not None and runs.height == 2 * 26 + 30
    assert [(bar.y, bar.length, bar.colour) for bar in runs.bars] == [(20, 100.0, "#2563eb"), (46, 200.0, "#f59e0b")]
    assert [bar.label for bar in runs.bars] == ["#1 1 x ml.p5.48xlarge", "#2 2 x ml.p4d.24xlarge"]
    assert [bar.value for bar in runs.bars] == [
        "16m40s (1 job, x1.25 its benchmark)",
        "33m20s (3 jobs, x1.80 its benchmark - DRIFTED)",
    ]
    costs = charts.configuration_chart(CONFIGURATIONS, "estimated_cost_usd_p50", "Cost", lambda usd: f"${usd:.2f}")
    assert costs is not None
    assert [(bar.length, bar.label, bar.value) for bar in costs.bars] == [
        (200.0, "#2 2 x ml.p4d.24xlarge", "$20.00 (3 jobs)"),
        (100.0, "#1 4 x ml.g5.48xlarge", "$10.00 (2 jobs)"),
    ]
    assert charts.configuration_chart(CONFIGURATIONS[:1], "estimated_cost_usd_p50", "Cost", str) is None


@pytest.mark.parametrize(
    ("share", "colour"),
    [(0.0, "#b91c1c"), (0.25, "#d75d14"), (0.5, "#f59e0b"), (0.75, "#7c8b31"), (1.0, "#047857")],
)
def test_a_weather_cell_goes_from_red_through_amber_to_green(share, colour):
    assert charts.share_colour(share) == colour


def test_a_weather_cell_sits_at_its_hour_and_day_over_a_grey_week():
    row = {
        "region": "us-east-1",
        "instance_count": 2,
        "instance_type": "ml.p4d.24xlarge",
        "jobs": 1,
        "cells": [
            {"hour": 2, "hour_of_week": 6 * 24 + 2, "day": "Sun", "got_it_within_15m_share": 1.0, "jobs": 1,
             "median_wait_seconds": 60.0},
        ],
    }  # fmt: skip
    grid = charts.weather_grid(row, ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"))
    assert grid.caption == "us-east-1: 2 x ml.p4d.24xlarge (1 job)"
    (cell,) = grid.cells
    assert (cell.x, cell.y, cell.colour) == (76, 126, "#047857")
    assert cell.title == "Sun 02:00 UTC: 100% of 1 job within 15 minutes, median wait 1m00s"
    assert len(grid.week) == 7 * 24 and grid.week[0] == (40, 18) and grid.week[-1] == (454, 126)
    assert grid.days[0] == (31, "Mon") and grid.hours[1] == (94, 3)
    assert (grid.width, grid.height) == (482, 150)


def test_the_templates_draw_the_geometry_and_escape_what_came_from_outside():
    chart = charts.wait_chart([job("2026-11-29T02:00:00+00:00", 60.0, 0)])
    task_row = {
        "dag_id": "<b>dag</b>", "task_id": "t", "runs": 1, "completed": 1, "no_capacity": 0, "failed_after_start": 0,
        "pending_seconds_p50": 60.0, "pending_seconds_p90": None, "verdict": "paid_off", "reason": "it's fine",
        "summary": "fell back in 0 of 1 job", "recurring": False,
    }  # fmt: skip
    body = render(
        "capacity.html",
        bad=2,
        tasks=[
            {"row": task_row, "fell_back": "50%", "ranks": "#1: 1", "waits": chart, "survival": None,
             "run_times": None, "costs": None, "costs_caption": "Median estimated cost per job, by configuration",
             "utilization": None},
        ],
    )  # fmt: skip
    assert "2 ledger entries could not be read" in body
    assert "&lt;b&gt;dag&lt;/b&gt; / t" in body and "<b>dag</b>" not in body
    assert "it&#39;s fine" in body and "1m00s / unknown" in body
    assert "<circle cx='60.0' cy='20.0' r='5' fill='#2563eb'><title>#1: 1m00s</title></circle>" in body
    assert "fill='#2563eb' font-size='12'>● #1</text>" in body and "● #2" not in body, "only the ranks charted"
    assert "<p>Median estimated cost per job, by configuration: unknown.</p>" in body
    assert "<p>GPU utilization per configuration: unknown.</p>" in body
    assert "<i>one DAG run</i>" in body
    assert body.count("<svg") == 1
    empty = render("capacity.html", bad=0, tasks=[])
    assert "No SageMaker jobs in the capacity ledger" in empty and "could not be read" not in empty


def test_jobs_created_within_a_second_or_two_still_span_the_chart():
    chart = charts.wait_chart([job("2026-11-29T02:00:00+00:00", 0.0, 0), job("2026-11-29T02:00:01.5+00:00", 0.0, 0)])
    assert chart is not None and [m.x for m in chart.marks] == [60.0, 620.0]


def test_a_first_choice_seen_free_at_once_is_charted_over_a_second_and_ends_at_every_job():
    at_once = {**SURVIVAL, "observed": 1, "censored": 0, "survival": [], "longest_seconds": 0.0, "p50_seconds": 0.0}
    chart = charts.survival_chart(at_once, 0.5)
    assert chart is not None
    assert chart.path == "M60.0,20.0H60.0" and round(chart.break_even_x or 0, 1) == 326.7
    assert chart.caption.endswith(": 1 seen free, 0 seen busy; p50 0s, ends at 100% after 0s")


def test_the_other_nights_caption_in_full():
    chart = charts.survival_chart({**SURVIVAL, "basis": "other nights"}, None)
    assert chart is not None and chart.caption == (
        "Share of jobs the first choice (1 x ml.p5.48xlarge) would still have kept waiting, on this task's other "
        "nights: 2 seen free, 1 seen busy; p50 10m00s, ends at 25% after 33m20s"
    )


def test_a_bar_chart_keeps_its_caption():
    runs = charts.configuration_chart(CONFIGURATIONS, "run_seconds_p50", "Median run time", charts.seconds)
    assert runs is not None and runs.caption == "Median run time"


def test_the_weather_grid_labels_every_day_and_every_third_hour():
    row = {"region": "us-east-1", "instance_count": 1, "instance_type": "ml.p5.48xlarge", "jobs": 0, "cells": []}
    grid = charts.weather_grid(row, ("Mon", "Tue", "Wed"))
    assert grid.days == ((31, "Mon"), (49, "Tue"), (67, "Wed"))
    assert grid.hours == tuple((40 + hour * 18, hour) for hour in (0, 3, 6, 9, 12, 15, 18, 21))
