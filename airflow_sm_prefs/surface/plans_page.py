"""The Capacity page's training plans view (``/capacity/plans``): the last plan advice and what each plan bought,
from what the CLI last kept in the shared store (``evidence.plan_snapshots``) and the ledger's jobs of the DAGs
the user may read. Rendered from ``templates/plans.html``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from airflow_sm_prefs.surface.page_templates import moment, render


def readable_groups(groups: Sequence[Mapping[str, Any]], dags: Collection[str]) -> list[dict[str, Any]]:
    """The advice's groups (as ``plan_snapshots.load_advice`` checked them) holding a task of a DAG the user may
    read, with only those tasks named. A DAG is matched by its exact id, never by a prefix of "dag.task" (DAG and
    task ids may both hold dots: "team" must not open "team.secret")."""
    allowed = set(dags)
    shown = []
    for group in groups:
        readable = [(dag, task) for dag, task in group["task_keys"] if dag in allowed]
        if readable:
            shown.append({**group, "tasks": [f"{dag}.{task}" for dag, task in readable], "task_keys": readable})
    return shown


def body(entries: Sequence[Mapping[str, Any]], dags: Collection[str]) -> str:
    from airflow_sm_prefs.analysis import plan_usage
    from airflow_sm_prefs.evidence import plan_snapshots

    advice = plan_snapshots.load_advice()
    listed = plan_snapshots.load_plans()
    plans = None
    if listed is not None:
        taken_at, region, states = listed
        # Held "so far" means until SageMaker listed them: the figures and their date go together.
        rows = [
            {**row, "words": plan_usage.in_words(row)} for row in plan_usage.usage(entries, states, moment(taken_at))
        ]
        plans = {"taken_at": taken_at, "region": region, "rows": rows}
    return render(
        "plans.html",
        advice=None
        if advice is None
        else {"taken_at": advice[0], "groups": readable_groups(advice[1], dags), "left_out": advice[2]},
        plans=plans,
    )
