"""Every preflight check, listed once, in the order they judge a list: a new check is a module and a line here.

The order matters twice: refusals come before anything is dropped, and the guardrails (``EntryCheck``s), which
judge the list as the user gave it, come before the adjustments, which work on what the guardrails left
(``finish_by`` first, so a plan put first knows how long the job may wait).
"""

from __future__ import annotations

from airflow_sm_prefs.preflight import (
    certified,
    cost_caps,
    finish_by,
    known_types,
    named_plans,
    plans_first,
    quotas,
    requirements,
)
from airflow_sm_prefs.preflight.check import Check

CHECKS: tuple[type[Check], ...] = (
    known_types.KnownInstanceTypes,
    certified.CertifiedOnly,
    requirements.MeetsRequirements,
    cost_caps.WithinCostCaps,
    quotas.WithinQuotas,
    named_plans.NamedPlansUsable,
    finish_by.FinishesBy,
    plans_first.PlansFirst,
)

# What every guardrail's objections lead to: an argument of the preflight as a whole, not of one check.
SHARED_ARGUMENTS = ("on_violation",)


# The operator arguments preflight reads, each once, in the checks' order; and those Airflow renders before the
# run (the operator's ``template_fields`` include them). Each operator built at DAG parse reads them.
ARGUMENTS: tuple[str, ...] = tuple(
    dict.fromkeys([*SHARED_ARGUMENTS, *(name for check in CHECKS for name in check.arguments)])
)
TEMPLATED_ARGUMENTS: tuple[str, ...] = tuple(dict.fromkeys(name for check in CHECKS for name in check.templated))
