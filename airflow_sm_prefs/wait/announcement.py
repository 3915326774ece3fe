"""The configuration SageMaker chose, announced while the job still runs: the XCom ``selection`` and metrics.

The worker announces a selection it sees before it defers; the trigger announces one it sees afterwards, itself,
without sending an event. An event would resume the task only to defer it again, and each resume is a chance
for Airflow's deferral race to fail the task (``deferral_hold``); a selection is the change most likely to come
seconds after the deferral.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, TypedDict

from airflow_sm_prefs.platform import supervisor_calls
from airflow_sm_prefs.platform.stats import stats
from airflow_sm_prefs.sagemaker.job_view import JobView

XCOM_KEY = "selection"

log = logging.getLogger(__name__)


class Selection(TypedDict):
    """XCom ``selection``: pushed as soon as SageMaker picked a preference, while the job still runs."""

    job_name: str | None
    job_kind: str
    selected_instance_type: str
    selected_instance_count: int
    selected_rank: int | None
    fell_back: bool | None
    pending_seconds: float
    region: str | None


def selection(view: JobView, region: str | None) -> Selection | None:
    if view.selected_type is None:
        return None
    return Selection(
        job_name=view.name,
        job_kind=view.kind.name,
        selected_instance_type=view.selected_type,
        selected_instance_count=view.selected_count or 0,
        selected_rank=view.selected_rank,
        fell_back=view.fell_back,
        pending_seconds=round(view.pending_seconds(), 3),
        region=region,
    )


def emit_selection(chosen: Selection) -> None:
    """``sm_prefs.selected``, ``sm_prefs.selected_rank``, ``sm_prefs.pending_seconds`` and ``sm_prefs.fallback``."""
    client = stats()
    tags = {
        "job_kind": chosen["job_kind"],
        "instance_type": str(chosen["selected_instance_type"]),
        "rank": str(chosen["selected_rank"]),
    }
    client.incr("sm_prefs.selected", tags=tags)
    client.gauge("sm_prefs.selected_rank", chosen["selected_rank"] or 0, tags=tags)
    client.timing("sm_prefs.pending_seconds", timedelta(seconds=chosen["pending_seconds"]), tags=tags)
    if chosen["fell_back"]:
        client.incr("sm_prefs.fallback", tags=tags)


def xcom_scope(task_instance: Any) -> dict[str, Any] | None:
    """Where a trigger's task instance keeps its XComs; None outside a triggerer (tests, ``airflow dags test``)."""
    if task_instance is None or not getattr(task_instance, "run_id", None):
        return None
    map_index = getattr(task_instance, "map_index", -1)
    return {
        "dag_id": task_instance.dag_id,
        "task_id": task_instance.task_id,
        "run_id": task_instance.run_id,
        "map_index": -1 if map_index is None else map_index,
    }


async def announce_from_trigger(view: JobView, region: str | None, task_instance: Any) -> bool:
    """Push the selection as the task instance's XCom and emit its metrics; False when it could not be pushed
    (no triggerer channel), so the task announces it when it resumes."""
    chosen = selection(view, region)
    scope = xcom_scope(task_instance)
    if chosen is None or scope is None:
        return False
    try:
        from airflow.sdk.execution_time.xcom import XCom

        await supervisor_calls.ask(XCom.set, XCOM_KEY, chosen, **scope)
    except Exception as error:  # the task pushes it when it resumes
        log.warning("Could not announce the selection of %s from the trigger (%s)", view.name, error)
        return False
    emit_selection(chosen)
    return True
