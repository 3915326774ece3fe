"""The Capacity page's charts as geometry: where each mark goes and what it says. The templates
(``templates/charts.html``) only draw what is computed here, so the arithmetic is tested without HTML.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.platform.formatting import format_seconds

RANK_COLOURS = ("#2563eb", "#f59e0b", "#dc2626", "#7c3aed", "#059669")
WIDTH, HEIGHT = 640, 220
LEFT, BOTTOM, TOP = 60, 30, 20


def seconds(value: float | None) -> str:
    return "unknown" if value is None else format_seconds(value)


def jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def rank_colour(rank: int | None) -> str:
    return "#111" if rank is None else RANK_COLOURS[rank % len(RANK_COLOURS)]


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    colour: str
    title: str


@dataclass(frozen=True)
class WaitChart:
    """Each job's wait for capacity over time, coloured by the rank it got."""

    marks: tuple[Mark, ...]
    longest: str
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: int = BOTTOM
    legend: tuple[tuple[str, str], ...] = ()  # (colour, words) of each rank a mark shows, in rank order


def wait_chart(entries: Iterable[Mapping[str, Any]]) -> WaitChart | None:
    points = [
        # The ledger's reader admitted only ISO 8601 times with a zone; datetime parses them many times faster.
        (dt.datetime.fromisoformat(e["created_at"]).timestamp(), float(e["pending_seconds"]), e["selected_rank"])
        for e in entries
        if e["created_at"]
    ]
    if not points:
        return None
    x_low, x_high = min(p[0] for p in points), max(p[0] for p in points)
    y_high = max(max(p[1] for p in points), 1.0)
    span = max(x_high - x_low, 1.0)
    marks = tuple(
        Mark(
            x=LEFT + (at - x_low) / span * (WIDTH - LEFT - 20),
            y=HEIGHT - BOTTOM - wait / y_high * (HEIGHT - BOTTOM - 20),
            colour=rank_colour(rank),
            title=f"{'no capacity' if rank is None else f'#{rank + 1}'}: {seconds(wait)}",
        )
        for at, wait, rank in points
    )
    # Only the ranks charted: a one-entry list's chart shows no #2, a five-entry list's names its #4 and #5.
    shown = sorted({rank for _, _, rank in points}, key=lambda rank: (rank is None, rank or 0))
    legend = tuple((rank_colour(rank), "no capacity" if rank is None else f"#{rank + 1}") for rank in shown)
    return WaitChart(marks, seconds(y_high), legend=legend)


@dataclass(frozen=True)
class SurvivalChart:
    """The share of jobs the first choice would still have kept waiting, against time, as an SVG step path,
    with the break-even wait marked where there is one."""

    caption: str
    path: str
    half_y: float
    horizon: str
    break_even_x: float | None
    break_even: str
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: int = BOTTOM
    top: int = TOP
    colour: str = RANK_COLOURS[0]


def survival_chart(wait: Mapping[str, Any] | None, break_even: float | None) -> SurvivalChart | None:
    if wait is None or not (wait["observed"] or wait["censored"]):
        return None
    horizon = max(float(wait["longest_seconds"]), break_even or 0.0, 1.0) * 1.05
    plot_width, plot_height = WIDTH - LEFT - 20, HEIGHT - BOTTOM - TOP

    def x(at: float) -> float:
        return LEFT + at / horizon * plot_width

    def y(share: float) -> float:
        return TOP + (1.0 - share) * plot_height

    path = [f"M{x(0):.1f},{y(1.0):.1f}"]
    remaining = 1.0
    for at, after in wait["survival"]:
        path.append(f"H{x(at):.1f}V{y(after):.1f}")
        remaining = after
    path.append(f"H{x(wait['longest_seconds']):.1f}")
    where = "at the times jobs fell back" if wait["basis"] == "same times" else "on this task's other nights"
    caption = (
        f"Share of jobs the first choice ({wait['instance_count']} x {wait['instance_type']}) would still have kept "
        f"waiting, {where}: {wait['observed']} seen free, {wait['censored']} seen busy; p50 "
        f"{seconds(wait['p50_seconds'])}, ends at {remaining:.0%} after {seconds(wait['longest_seconds'])}"
    )
    return SurvivalChart(
        caption=caption,
        path="".join(path),
        half_y=y(0.5),
        horizon=seconds(horizon),
        break_even_x=None if break_even is None else x(break_even),
        break_even=seconds(break_even),
    )


@dataclass(frozen=True)
class Bar:
    y: int
    length: float
    colour: str
    label: str
    value: str


BAR_CHART_LEFT = 230  # room for the bars' labels
BAR_HEIGHT = 26
BAR_VALUE_ROOM = 210  # room right of the longest bar for its figure


@dataclass(frozen=True)
class BarChart:
    """One bar per configuration with a figure, the longest spanning the chart."""

    caption: str
    bars: tuple[Bar, ...]
    height: int
    width: int = WIDTH
    left: int = BAR_CHART_LEFT
    bar_height: int = BAR_HEIGHT


def _benchmark(configuration: Mapping[str, Any], key: str) -> str:
    """How the median run compares with the configuration's certified run time, on the run-time chart."""
    ratio = configuration.get("run_time_vs_certified_p50")
    if key != "run_seconds_p50" or ratio is None:
        return ""
    return f", x{ratio:.2f} its benchmark" + (" - DRIFTED" if configuration.get("drifted") else "")


def configuration_chart(
    configurations: Sequence[Mapping[str, Any]], key: str, caption: str, show: Callable[[Any], str]
) -> BarChart | None:
    measured = [c for c in configurations if c[key] is not None]
    if not measured:
        return None
    longest = max(c[key] for c in measured) or 1.0
    bars = tuple(
        Bar(
            y=20 + index * BAR_HEIGHT,
            length=configuration[key] / longest * (WIDTH - BAR_CHART_LEFT - BAR_VALUE_ROOM),
            colour=rank_colour(configuration["rank"] or 0),
            label=f"#{(configuration['rank'] or 0) + 1} {configuration['instance_count']} x "
            f"{configuration['instance_type']}",
            value=f"{show(configuration[key])} ({jobs(configuration['jobs'])}{_benchmark(configuration, key)})",
        )
        for index, configuration in enumerate(measured)
    )
    return BarChart(caption, bars, BAR_HEIGHT * len(bars) + 30)


def share_colour(share: float) -> str:
    """From red (no job got it within 15 minutes) through amber to green (every job did)."""
    low, middle, high = (185, 28, 28), (245, 158, 11), (4, 120, 87)
    start, end, t = (low, middle, share * 2) if share < 0.5 else (middle, high, share * 2 - 1)
    red, green, blue = (round(a + (b - a) * t) for a, b in zip(start, end, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    colour: str
    title: str


@dataclass(frozen=True)
class WeatherGrid:
    """A configuration's hours of the week: a cell per hour a job asked for it, over a grey week."""

    caption: str
    cells: tuple[Cell, ...]
    days: tuple[tuple[int, str], ...]  # (label's y, day)
    hours: tuple[tuple[int, int], ...]  # (label's x, hour)
    week: tuple[tuple[int, int], ...]  # every hour's (x, y)
    width: int
    height: int
    size: int


def weather_grid(row: Mapping[str, Any], days: Sequence[str]) -> WeatherGrid:
    size, left, top = 18, 40, 18
    cells = tuple(
        Cell(
            x=left + cell["hour"] * size,
            y=top + (cell["hour_of_week"] // 24) * size,
            colour=share_colour(cell["got_it_within_15m_share"]),
            title=f"{cell['day']} {cell['hour']:02d}:00 UTC: {cell['got_it_within_15m_share']:.0%} of "
            f"{jobs(cell['jobs'])} within 15 minutes, median wait {seconds(cell['median_wait_seconds'])}",
        )
        for cell in row["cells"]
    )
    return WeatherGrid(
        caption=f"{row['region']}: {row['instance_count']} x {row['instance_type']} ({jobs(row['jobs'])})",
        cells=cells,
        days=tuple((top + d * size + 13, day) for d, day in enumerate(days)),
        hours=tuple((left + h * size, h) for h in range(0, 24, 3)),
        week=tuple((left + h * size, top + d * size) for d in range(len(days)) for h in range(24)),
        width=left + 24 * size + 10,
        height=top + len(days) * size + 6,
        size=size,
    )
