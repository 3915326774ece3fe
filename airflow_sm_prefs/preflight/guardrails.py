"""Guardrails: what SageMaker does not check about a preference list, checked before any job exists.

SageMaker selects by capacity only. A fallback that costs more than the team will pay, or a listed type whose
quota is short (which makes SageMaker refuse the whole list), is found here, each with the entry and the
reason. ``on_violation="fail"`` refuses the task; ``"drop"`` removes the offending entries, keeps the order of
the rest, and records what it removed (``dropped_preferences``); it fails only if nothing is left.

Each guardrail is a ``check.EntryCheck`` (the entries it objects to, by rank, with reasons) in a module of its
own: ``requirements.MeetsRequirements``, ``cost_caps.WithinCostCaps``, ``quotas.WithinQuotas``,
``named_plans.NamedPlansUsable``, listed in ``registry``. This module holds what they share: ``on_violation``
and how it is applied.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal, cast

from airflow_sm_prefs.facts.record import DroppedPreference
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError

OnViolation = Literal["fail", "drop"]


def judged_on_violation(value: Any) -> OnViolation:
    """The operator's ``on_violation``: what every guardrail's objections lead to."""
    if value not in ("fail", "drop"):
        raise RequestValidationError([f"on_violation must be 'fail' or 'drop', got {value!r:.60}"])
    return cast(OnViolation, value)


# -- applying them -----------------------------------------------------------------------------------------------


def apply(
    kind: JobKind, request: dict[str, Any], violations: Mapping[int, str], on_violation: OnViolation
) -> tuple[dict[str, Any], list[DroppedPreference]]:
    """The request to send and the entries dropped; ``RequestValidationError`` when the task must fail."""
    if not violations:
        return request, []
    ordered = [violations[rank] for rank in sorted(violations)]
    listed = entries(kind, request)
    if on_violation == "fail":
        raise RequestValidationError([*ordered, "no SageMaker job was created (on_violation='fail')"])
    kept = [entry.api for entry in listed if entry.rank not in violations]
    if not kept:
        raise RequestValidationError(
            [*ordered, "every preference was dropped (on_violation='drop'); no SageMaker job was created"]
        )
    shortened = copy.deepcopy(request)
    kind.resources(shortened)["InstancePreferences"] = kept
    dropped = [
        DroppedPreference(rank=entry.rank, entry=entry.api, reason=violations[entry.rank])
        for entry in listed
        if entry.rank in violations
    ]
    return shortened, dropped
