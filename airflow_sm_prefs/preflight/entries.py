"""The entries of a request that a check can judge: each with its rank, type and count, as every check reads them.

Its own module so that each check, and what applies the checks, reads the entries one way and none of the
checks imports what applies them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import is_templated

DEFAULT_MAX_RUNTIME_SECONDS = 86400  # SageMaker's default MaxRuntimeInSeconds for both kinds


@dataclass(frozen=True)
class Entry:
    rank: int
    api: dict[str, Any]  # as in the request
    instance_type: str
    count: int

    @property
    def plan_backed(self) -> bool:
        return bool(self.api.get("TrainingPlanArns"))

    @property
    def label(self) -> str:
        return f"preference #{self.rank + 1} ({self.count} x {self.instance_type})"


def entries(kind: JobKind, request: Mapping[str, Any]) -> list[Entry]:
    """The request's preferences whose type and count are known: a list still templated (a DAG file being
    parsed) has none, and an entry still templated is left out, for the run to judge."""
    resources = kind.resources(request)
    uniform = resources.get("InstanceCount")
    listed = resources.get("InstancePreferences")
    if not isinstance(listed, list):
        return []
    known = []
    for rank, api in enumerate(listed):
        if not isinstance(api, dict):
            continue
        instance_type, count = api.get("InstanceType"), api.get("InstanceCount", uniform)
        if isinstance(instance_type, str) and not is_templated(instance_type) and type(count) is int:
            known.append(Entry(rank, dict(api), instance_type, count))
    return known


def max_runtime_seconds(request: Mapping[str, Any]) -> int:
    stopping = request.get("StoppingCondition") or {}
    return int(stopping.get("MaxRuntimeInSeconds") or DEFAULT_MAX_RUNTIME_SECONDS)
