"""Guardrails: what SageMaker does not check about a preference list, checked before any job exists.

SageMaker selects by capacity only. A fallback that costs more than the team will pay, or a listed type whose
quota is short (which makes SageMaker refuse the whole list), is found here, each with the entry and the
reason. ``on_violation="fail"`` refuses the task; ``"drop"`` removes the offending entries, keeps the order of
the rest, and records what it removed (``dropped_preferences``); it fails only if nothing is left.

Each guardrail is a ``Check`` (the entries it objects to, by rank, with reasons) in a module of its own:
``requirements.MeetsRequirements``, ``cost_caps.WithinCostCaps``, ``quotas.WithinQuotas``,
``plans_first.NamedPlansUsable``. ``checks_for`` turns
a task's arguments into the checks to run and ``enforce`` applies them in one loop. A new guardrail is a
module with its ``Check`` and a line in ``checks_for`` (with its argument in ``Guardrails``), nothing in the
operator's code but the argument.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from airflow_sm_prefs.evidence.record import DroppedPreference
from airflow_sm_prefs.preflight import cost_caps, requirements
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.preflight.requirements import InstanceRequirements
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError, is_templated

OnViolation = Literal["fail", "drop"]


@dataclass(frozen=True)
class Guardrails:
    """The operator's guardrail arguments, judged when the operator is built."""

    max_hourly_cost_usd: float | None = None
    max_cost_usd: float | None = None
    on_violation: OnViolation = "fail"
    quota_preflight: bool = True
    requires: InstanceRequirements | None = None

    @classmethod
    def judged(
        cls, max_hourly_cost_usd: Any, max_cost_usd: Any, on_violation: Any, quota_preflight: Any, requires: Any
    ) -> Guardrails:
        needs = requirements.judged(requires)
        problems: list[str] = []
        hourly = _limit(max_hourly_cost_usd, "max_hourly_cost_usd", problems)
        worst = _limit(max_cost_usd, "max_cost_usd", problems)
        if on_violation not in ("fail", "drop"):
            problems.append(f"on_violation must be 'fail' or 'drop', got {on_violation!r:.60}")
        if not isinstance(quota_preflight, bool):
            problems.append(f"quota_preflight must be True or False, got {type(quota_preflight).__name__}")
        if problems:
            raise RequestValidationError(problems)
        return cls(hourly, worst, on_violation, quota_preflight, needs)

    @property
    def cost_caps(self) -> cost_caps.CostCaps:
        return cost_caps.CostCaps(self.max_hourly_cost_usd, self.max_cost_usd)


def _limit(value: Any, name: str, problems: list[str]) -> float | None:
    if value is None or (isinstance(value, str) and is_templated(value)):
        return None  # a template is judged once rendered
    if isinstance(value, str):  # what Jinja renders a number to
        try:
            value = float(value)
        except ValueError:
            problems.append(f"{name} must be a positive number of US dollars, got {value!r:.60}")
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        problems.append(f"{name} must be a positive number of US dollars, got {value!r:.60}")
        return None
    return float(value)


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


class Check(Protocol):
    """One guardrail: the entries of a request it objects to, by rank, each with its reason."""

    def violations(self, kind: JobKind, request: Mapping[str, Any]) -> dict[int, str]: ...


def checks_for(
    guardrails: Guardrails,
    region: str | None,
    quota_client: Callable[[], Any],
    cache_key: tuple[Any, ...],
    log: Any,
    plans_client: Callable[[], Any] | None = None,
) -> list[Check]:
    """The guardrails a task's arguments turn on, in the order their reasons are given: each check lives in a
    module of its own, and this is the one line that turns it on. ``plans_client``: a SageMaker client factory
    for a kind whose entries may name training plans."""
    # Read only when a check runs: the price table is on object storage, the quotas need AWS's clients.
    from airflow_sm_prefs.preflight import plans_first, quotas
    from airflow_sm_prefs.reference import prices

    checks: list[Check] = []
    if guardrails.requires is not None:
        checks.append(requirements.MeetsRequirements(guardrails.requires))
    if guardrails.cost_caps.any:
        checks.append(cost_caps.WithinCostCaps(guardrails.cost_caps, prices.current(), region))
    if guardrails.quota_preflight:
        checks.append(quotas.WithinQuotas(quota_client, cache_key, log))
    if plans_client is not None:
        checks.append(plans_first.NamedPlansUsable(plans_first.PlansReader(plans_client, log)))
    return checks


def enforce(
    kind: JobKind,
    request: dict[str, Any],
    checks: Sequence[Check],
    on_violation: OnViolation,
    log: Any,
) -> tuple[dict[str, Any], list[DroppedPreference]]:
    """Every check over the rendered request, before any job exists; the request to send and what was dropped
    (each logged with its reason). An entry several checks object to is given the first one's reason."""
    violations: dict[int, str] = {}
    for check in checks:
        for rank, reason in check.violations(kind, request).items():
            violations.setdefault(rank, reason)
    shortened, dropped = apply(kind, request, violations, on_violation)
    for removed in dropped:
        log.warning("Dropped %s", removed["reason"])
    return shortened, dropped
