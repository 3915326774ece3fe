"""Buying a training plan: the one place ``CreateTrainingPlan`` is called, and only from ``plans reserve``.

Only an offering this host was shown (``offerings_shown``) is bought, and only after SageMaker is asked again
with the search that showed it: the fee held to the buyer's cap is the one SageMaker gives now, in US dollars
(a fee in any other currency cannot be held to a dollar cap, so it is refused, never converted). A person
confirms between ``checked`` and ``buy``; nothing in a DAG or an operator reaches this module.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.sagemaker import offerings_shown, training_plans
from airflow_sm_prefs.sagemaker.training_plans import fee_text

PLAN_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}")  # CreateTrainingPlan's TrainingPlanName


class PurchaseRefused(SageMakerPreferencesError):
    """Nothing was bought, said in one line with why."""


@dataclass(frozen=True)
class Purchase:
    """An offering checked against its cap and named: what ``buy`` sends, once a person confirmed it."""

    sagemaker: Any
    offering: training_plans.Offering
    name: str

    def summary(self) -> str:
        return f"training plan {self.name}: {offering_line(self.offering)}"


def offering_line(offering: training_plans.Offering) -> str:
    start = offering.start.isoformat() if offering.start else "?"
    return (
        f"{offering.offering_id}  {offering.count} x {offering.instance_type}  from {start} for "
        f"{offering.duration_hours:g}h  upfront {fee_text(offering.upfront_fee, offering.currency)}"
    )


def derived_name(offering: training_plans.Offering) -> str:
    """``p5-48xlarge-x2-20261205-2100``: the type, count and start, as a plan name may be written."""
    family = re.sub(r"[^a-zA-Z0-9]+", "-", offering.instance_type.removeprefix("ml.")).strip("-")
    start = offering.start.strftime("%Y%m%d-%H%M") if offering.start else "unscheduled"
    return f"{family}-x{offering.count}-{start}"[:64].rstrip("-")


def checked(offering_id: str, *, max_usd: float, name: str | None, client_for: Callable[[str | None], Any]) -> Purchase:
    """The offering ``offering_id`` as SageMaker offers it now, its fee within ``max_usd``, under a valid name;
    ``client_for`` gives a SageMaker client for the Region the offering was shown in."""
    query = offerings_shown.shown_query(offering_id, dt.datetime.now(dt.UTC))
    if query is None:
        raise PurchaseRefused(
            f"offering {offering_id[:80]!r} was not shown on this host in the last "
            f"{offerings_shown.SHOWN_FOR.seconds // 3600}h; find it with `airflow-sm-prefs plans offerings` or "
            "`plans advise` first (nothing was bought)"
        )
    sagemaker = client_for(query.get("region"))  # where the offering was shown
    try:
        # Whether they were kept again matters to no later command: this one buys now or says why not.
        search = offerings_shown.search_and_remember(sagemaker, query)
        fresh = {offering.offering_id: offering for offering in search.offerings}
    except Exception as error:
        raise PurchaseRefused(training_plans.call_failed("searching the offering again", error, buying=True)) from None
    offering = fresh.get(offering_id)
    if offering is None:
        raise PurchaseRefused(f"SageMaker no longer offers {offering_id[:80]}; search again (nothing was bought)")
    fee = offering.usd_fee
    if fee is None:
        raise PurchaseRefused(
            f"the offering's fee is {fee_text(offering.upfront_fee, offering.currency)}, which --max-usd cannot "
            "bound (nothing was bought)"
        )
    if fee > max_usd:
        raise PurchaseRefused(
            f"the offering's upfront fee is {fee_text(offering.upfront_fee, 'USD')}, more than --max-usd "
            f"{fee_text(max_usd, 'USD')} (nothing was bought)"
        )
    chosen = name or derived_name(offering)
    if not PLAN_NAME.fullmatch(chosen):
        raise PurchaseRefused(
            f"--name {chosen[:80]!r}: letters, digits and single hyphens, at most 64 characters (nothing was bought)"
        )
    return Purchase(sagemaker, offering, chosen)


def buy(purchase: Purchase) -> str:
    """Buy the checked offering; its plan's ARN."""
    try:
        response = purchase.sagemaker.create_training_plan(
            TrainingPlanName=purchase.name, TrainingPlanOfferingId=purchase.offering.offering_id
        )
    except Exception as error:
        raise PurchaseRefused(training_plans.call_failed("buying the training plan", error, buying=True)) from None
    return str(response["TrainingPlanArn"])
