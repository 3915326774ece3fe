"""The Capacity page's training plans view (``/capacity/plans``): the last plan advice and what each plan bought,
from what the CLI last kept in the shared store (``evidence.plan_snapshots``) and the ledger's jobs of the DAGs
the user may read. Rendered from a Jinja template with autoescaping: every value from outside is escaped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any

TEMPLATES = "templates"


@cache
def _environment() -> Any:
    import jinja2

    from airflow_sm_prefs.platform.formatting import format_seconds

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("airflow_sm_prefs.surface", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["seconds"] = lambda value: "unknown" if value is None else format_seconds(value)
    environment.filters["usd"] = lambda value: "unknown" if value is None else f"${value:,.2f}"
    environment.filters["when"] = _when
    return environment


def _moment(text: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _when(text: str) -> str:
    return _moment(text).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def readable_groups(groups: Sequence[Mapping[str, Any]], dags: Collection[str]) -> list[dict[str, Any]]:
    """The advice's groups holding a task of a DAG the user may read, with only those tasks named."""
    shown = []
    for group in groups:
        tasks = [task for task in group["tasks"] if any(str(task).startswith(f"{dag}.") for dag in dags)]
        if tasks:
            shown.append({**group, "tasks": tasks})
    return shown


def body(entries: Sequence[Mapping[str, Any]], dags: Collection[str]) -> str:
    from airflow_sm_prefs.evidence import plan_snapshots, plan_usage

    advice = plan_snapshots.load_advice()
    listed = plan_snapshots.load_plans()
    plans = None
    if listed is not None:
        taken_at, region, states = listed
        # Held "so far" means until SageMaker listed them: the figures and their date go together.
        rows = [
            {**row, "words": plan_usage.in_words(row)} for row in plan_usage.usage(entries, states, _moment(taken_at))
        ]
        plans = {"taken_at": taken_at, "region": region, "rows": rows}
    return str(
        _environment()
        .get_template("plans.html")
        .render(
            advice=None if advice is None else {"taken_at": advice[0], "groups": readable_groups(advice[1], dags)},
            plans=plans,
        )
    )
