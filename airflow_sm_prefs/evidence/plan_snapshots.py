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
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict

from airflow_sm_prefs.sagemaker.training_plans import PlanState


class AdviceOption(TypedDict):
    option: str
    time_to_result_p50_seconds: float | None
    time_to_result_p90_seconds: float | None
    expected_cost_usd: float | None


Share = Annotated[float, Field(ge=0, le=1)]


class AdviceGroup(TypedDict):
    """What the plans page shows of one group of ``plan_advice.options``."""

    first_choice: str
    region: str | None
    verdict: str
    in_words: str
    tasks: list[str]
    task_keys: list[tuple[str, str]]
    evidence_jobs: int
    jobs_per_day: float
    sold_out_jobs: int
    sold_out_share: Share
    sold_out_share_90: tuple[Share, Share]
    window_days: float
    jobs_in_window: int
    options: list[AdviceOption]


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


def load_advice() -> tuple[str, list[dict[str, Any]], int] | None:
    """(when, groups, how many groups were left out) of the last ``plans advise``; None when never run or
    unreadable. Each group is checked against the shape the page shows (``AdviceGroup``): one this version
    cannot read (a share as text, an interval that is not two numbers, options that are not a list) is left out
    and counted, never shown half."""
    from pydantic import TypeAdapter, ValidationError

    document = _load(ADVICE)
    if document is None or not isinstance(document.get("groups"), list):
        return None
    shape = TypeAdapter(AdviceGroup)
    groups: list[dict[str, Any]] = []
    for group in document["groups"]:
        try:
            groups.append(dict(shape.validate_python(group)))
        except ValidationError:
            continue
    return str(document.get("taken_at")), groups, len(document["groups"]) - len(groups)
