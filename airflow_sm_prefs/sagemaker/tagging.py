"""Tags that tie a SageMaker job to the Airflow task instance that launched it.

They let cost reports group spend by DAG and task, and let an audit (the fault campaign) find every job a
task instance ever launched without trusting Airflow's own records.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

MAX_TAGS = 50  # SageMaker's limit per resource
MAX_VALUE = 256
_TAG_PUNCTUATION = frozenset("_.:/=+-@")

DAG_ID = "airflow:dag_id"
TASK_ID = "airflow:task_id"
RUN_ID = "airflow:run_id"
MAP_INDEX = "airflow:map_index"
# Which try created the job, and the pending bound the task enforces itself: on Airflow before 3.3, which has
# no task_state_store, a later try rebuilds its claim on the job from these.
TRY_NUMBER = "airflow:try_number"
PENDING_UNTIL = "sm_prefs:pending_until"
# Added after the create, by the listener, when a try failed for good for a reason the package cannot attribute
# and the job was kept running: the try after it (a retry or a clear) reattaches instead of replacing the job.
KEPT_AFTER_TRY = "sm_prefs:kept_after_try"


def _allowed(character: str) -> bool:
    # SageMaker's pattern: \p{L} \p{Z} \p{N} and _ . : / = + - @ (a tab or newline is not \p{Z}).
    return unicodedata.category(character)[0] in "LZN" or character in _TAG_PUNCTUATION


def tag_value(text: str) -> str:
    return "".join(c if _allowed(c) else "_" for c in text)[:MAX_VALUE]


def task_instance_tags(
    dag_id: str, task_id: str, run_id: str, map_index: int, *, try_number: int | None = None
) -> dict[str, str]:
    tags = {
        DAG_ID: tag_value(dag_id),
        TASK_ID: tag_value(task_id),
        RUN_ID: tag_value(run_id),
        MAP_INDEX: str(map_index),
    }
    if try_number is not None:
        tags[TRY_NUMBER] = str(try_number)
    return tags


def with_task_instance_tags(
    existing: Sequence[Mapping[str, Any]] | None, ours: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The user's tags first and untouched; ours added where the key is free and the limit allows."""
    tags = [dict(tag) for tag in existing or ()]
    taken = {tag.get("Key") for tag in tags}
    for key, value in ours.items():
        if key not in taken and len(tags) < MAX_TAGS:
            tags.append({"Key": key, "Value": value})
    return tags
