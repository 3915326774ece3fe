"""Capacity weather: per Region, configuration and hour of the week, how often it had room.

Every job that listed a configuration, at any rank, says something about it from the moment the job was
created: it got that configuration within 15 minutes; or it was still waiting (or got it) after 15 minutes, so
the configuration was busy then. A job that got another entry sooner says nothing about this one and is not
counted. Hours are UTC, by the job's creation.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_sm_prefs.analysis.counterfactual import Spell, Timeline
from airflow_sm_prefs.analysis.survival import kaplan_meier

SOON_SECONDS = 900.0
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# From little room to plenty, for the text heatmap: each glyph a fifth of the share of jobs that got it soon.
SHADES = ("·", "░", "▒", "▓", "█")


def weather(
    entries: Iterable[Mapping[str, Any]], region: str | None = None, timeline: Timeline | None = None
) -> list[dict[str, Any]]:
    """One row per (Region, type, count): its cells by hour of the week, only those with evidence."""
    timeline = timeline or Timeline(entries)
    rows = []
    for (where, _account), configuration, spells in sorted(timeline.items(), key=lambda item: (str(item[0]), item[1])):
        if region is not None and where != region:
            continue
        by_hour: dict[int, list[Spell]] = defaultdict(list)
        for spell in spells:
            by_hour[hour_of_week(spell.start)].append(spell)
        cells: list[dict[str, Any]] = []
        for hour, found in sorted(by_hour.items()):
            soon = sum(1 for s in found if s.got_it and s.wait <= SOON_SECONDS)
            late = sum(1 for s in found if s.wait > SOON_SECONDS or (not s.got_it and s.wait >= SOON_SECONDS))
            if not soon + late:
                continue
            curve = kaplan_meier((s.wait, s.got_it) for s in found)
            cells.append(
                {
                    "hour_of_week": hour,
                    "day": DAYS[hour // 24],
                    "hour": hour % 24,
                    "jobs": soon + late,
                    "got_it_within_15m_share": round(soon / (soon + late), 4),
                    "median_wait_seconds": curve.quantile(0.5),
                }
            )
        if cells:
            rows.append(
                {
                    "region": where,
                    "instance_type": configuration[0],
                    "instance_count": configuration[1],
                    "jobs": sum(c["jobs"] for c in cells),
                    "cells": cells,
                }
            )
    return rows


def hour_of_week(timestamp: float) -> int:
    """Monday 00:00-01:00 UTC is 0; the epoch fell on a Thursday (day 3)."""
    hours = int(timestamp // 3600)
    return ((hours // 24 + 3) % 7) * 24 + hours % 24


def shade(share: float) -> str:
    return SHADES[min(len(SHADES) - 1, int(share * len(SHADES)))]


def render(rows: list[dict[str, Any]], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(rows, indent=2)
    if not rows:
        return "No job in the capacity ledger listed a configuration with a count."
    lines = [
        "Share of jobs that got the configuration within 15 minutes, by UTC hour of the week: "
        f"{SHADES[0]} under 20 %, {SHADES[1]} 20-40 %, {SHADES[2]} 40-60 %, {SHADES[3]} 60-80 %, "
        f"{SHADES[4]} 80 % or more, blank: no job then."
    ]
    for row in rows:
        lines.append("")
        lines.append(f"{row['region']}  {row['instance_count']} x {row['instance_type']}  ({row['jobs']} job(s))")
        lines.append("     " + "".join(f"{hour:<3}" for hour in range(0, 24, 3)).rstrip())
        cells = {cell["hour_of_week"]: cell for cell in row["cells"]}
        for index, day in enumerate(DAYS):
            marks = "".join(
                shade(cells[h]["got_it_within_15m_share"]) if h in cells else " "
                for h in range(index * 24, index * 24 + 24)
            )
            lines.append(f"{day}  {marks}")
    return "\n".join(lines)
