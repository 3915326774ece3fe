"""``List*Jobs``: filters, sort orders, and pagination tokens, the way the service documents them.

Tokens are opaque and keyset-based: a token names the last job of its page by its sort key, and the query it
belongs to, so a job created between two pages is neither shown twice nor skipped, and a token from one
query is refused by another.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

from sm_prefs_devkit.emulator import responses, service_model
from sm_prefs_devkit.emulator.errors import ValidationException
from sm_prefs_devkit.emulator.kinds import EmulatedKind
from sm_prefs_devkit.emulator.model import Job

DEFAULT_PAGE = 10
# Filters in the model that the emulator does not model: refused, never silently ignored.
UNMODELLED_FILTERS = ("WarmPoolStatusEquals",)

SortKey = tuple[Any, ...]
SORT_KEYS: dict[str, Callable[[Job], SortKey]] = {
    "CreationTime": lambda job: (job.created, job.seq),
    "Name": lambda job: (job.name, job.seq),
    "Status": lambda job: (job.status, job.created, job.seq),
}


def page(kind: EmulatedKind, jobs: list[Job], request: dict[str, Any]) -> dict[str, Any]:
    for unmodelled in UNMODELLED_FILTERS:
        if unmodelled in request:
            raise ValidationException(f"{unmodelled} is not modelled by the airflow-sm-prefs emulator")
    selected = [job for job in jobs if job.kind == kind.name and _matches(job, request)]
    limit = request.get("MaxResults", DEFAULT_PAGE)
    status = request.get("StatusEquals")
    # Documented for ListTrainingJobs only: with MaxResults set, the service first takes the MaxResults most
    # recent jobs whatever their status, then keeps those with the status asked for.
    takes_then_filters = kind.status_filter_after_paging and status is not None and "MaxResults" in request
    if status is not None and not takes_then_filters:
        selected = [job for job in selected if job.status == status]
    if takes_then_filters:
        order, descending = SORT_KEYS["CreationTime"], True
    else:
        order, descending = SORT_KEYS[request.get("SortBy", "CreationTime")], request.get("SortOrder") == "Descending"
    selected.sort(key=order, reverse=descending)
    query = _fingerprint(request)
    after = _decode(request.get("NextToken"), query)
    if after is not None:
        selected = [job for job in selected if (order(job) < after if descending else order(job) > after)]
    shown = selected[:limit]
    response: dict[str, Any] = {}
    if len(selected) > limit:
        response["NextToken"] = _encode(query, order(shown[-1]))
    if takes_then_filters:
        shown = [job for job in shown if job.status == status]
        requested = SORT_KEYS[request.get("SortBy", "CreationTime")]
        shown.sort(key=requested, reverse=request.get("SortOrder") == "Descending")
    response[kind.summaries_field] = [responses.summarize(kind, job) for job in shown]
    return response


def _matches(job: Job, request: dict[str, Any]) -> bool:
    name_contains = request.get("NameContains")
    if name_contains and name_contains.lower() not in job.name.lower():
        return False
    plan = request.get("TrainingPlanArnEquals")
    if plan is not None and job.plan_arn != plan:
        return False
    bounds = (
        ("CreationTimeAfter", job.created, 1),
        ("CreationTimeBefore", job.created, -1),
        ("LastModifiedTimeAfter", job.last_modified, 1),
        ("LastModifiedTimeBefore", job.last_modified, -1),
    )
    for key, value, direction in bounds:
        if key in request:
            limit = service_model.to_epoch(request[key])  # the request was checked against the model before
            if (direction == 1 and not value > limit) or (direction == -1 and not value < limit):
                return False
    return True


def _fingerprint(request: dict[str, Any]) -> str:
    query = {key: value for key, value in request.items() if key not in ("NextToken", "MaxResults")}
    return hashlib.sha256(json.dumps(query, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _encode(query: str, after: SortKey) -> str:
    return base64.urlsafe_b64encode(json.dumps({"q": query, "after": list(after)}).encode()).decode()


def _decode(token: str | None, query: str) -> SortKey | None:
    if not token:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        if decoded["q"] != query:
            raise ValueError("the token belongs to another query")
        return tuple(decoded["after"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationException("Invalid pagination token given") from exc
