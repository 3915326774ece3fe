"""The account's training plans and the latest plan advice, as the CLI last read them, kept in the shared store
(``<[sm_prefs] storage>/training-plans/``) for the Capacity page: the API server then shows them without
calling SageMaker itself (it holds no rights to, and a page view must not search offerings).

Each document says when it was taken and in which Region; a page shows that date beside it. Written by
``airflow-sm-prefs plans list|used|advise``; a store that refuses the write costs the page its freshness, never
the command. Read as any file others may write: bounded, JSON only, and a damaged one is shown as missing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from airflow_sm_prefs.sagemaker.training_plans import PlanState

FOLDER = "training-plans"
PLANS, ADVICE = "plans.json", "advice.json"
MAX_BYTES = 4 << 20  # a few hundred plans or groups; more is not a snapshot this package wrote


def _place(name: str) -> Any:
    from airflow_sm_prefs.storage import object_storage

    return object_storage.shared_file("training_plans_path", FOLDER) / name


def _save(name: str, document: dict[str, Any]) -> None:
    from airflow_sm_prefs.storage import object_storage

    object_storage.replace_whole(_place(name), json.dumps(document, default=str), prefix=".snapshot-")


def _load(name: str) -> dict[str, Any] | None:
    from airflow_sm_prefs.storage import untrusted_files

    try:
        document = untrusted_files.read_json(_place(name), MAX_BYTES)
    except (untrusted_files.UntrustedFileError, FileNotFoundError):
        return None
    return document if isinstance(document, dict) else None


def save_plans(plans: Sequence[PlanState], region: str | None, now: dt.datetime) -> None:
    _save(PLANS, {"taken_at": now.isoformat(), "region": region, "plans": [plan.as_dict() for plan in plans]})


def load_plans() -> tuple[str, str | None, list[PlanState]] | None:
    """(when, Region, plans) as last listed; None when never listed or unreadable."""
    document = _load(PLANS)
    if document is None:
        return None
    try:
        return str(document["taken_at"]), document.get("region"), [PlanState.from_dict(p) for p in document["plans"]]
    except (KeyError, TypeError, ValueError):
        return None


def save_advice(advice: Sequence[dict[str, Any]], now: dt.datetime) -> None:
    _save(ADVICE, {"taken_at": now.isoformat(), "groups": list(advice)})


def load_advice() -> tuple[str, list[dict[str, Any]]] | None:
    """(when, groups) of the last ``plans advise``; None when never run or unreadable."""
    document = _load(ADVICE)
    if document is None or not isinstance(document.get("groups"), list):
        return None
    groups = [group for group in document["groups"] if isinstance(group, dict) and isinstance(group.get("tasks"), list)]
    return str(document.get("taken_at")), groups
