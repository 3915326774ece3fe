"""The account's Flexible Training Plans as SageMaker describes them, and the offerings it would sell.

Plans reserve instances of one type for a window at an upfront fee; a training job's entry that names a plan
(``TrainingPlanArns``) runs on it while it is ``Active`` and has room. Reading them needs
``sagemaker:ListTrainingPlans`` / ``DescribeTrainingPlan``; searching ``SearchTrainingPlanOfferings``; buying
``CreateTrainingPlan``, which only a person's command calls (``airflow-sm-prefs plans reserve``).

Every call goes through a client with short deadlines (``CALL_CONFIG``): a plan lookup before a create call,
or a search for advice, waits seconds for an unreachable endpoint, never minutes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.sagemaker.connection import Connection

CALL_CONFIG = {"connect_timeout": 5, "read_timeout": 15, "retries": {"total_max_attempts": 3, "mode": "standard"}}
MAX_PAGES = 20  # 2,000 plans: more than any account holds; a listing that never ends is cut here
USABLE = frozenset({"Active"})
BECOMING_USABLE = frozenset({"Pending", "Scheduled"})
ENDED = frozenset({"Expired", "Failed"})
# SageMaker gives full access to a plan's instances until 30 minutes before its end, then terminates the jobs
# running on them (the developer guide, "Training plans utilization for SageMaker training jobs").
RECLAIMED_BEFORE_END = dt.timedelta(minutes=30)


@dataclass(frozen=True)
class PlanState:
    """One plan as SageMaker answered for it just now."""

    arn: str
    name: str
    status: str
    instance_type: str | None
    total: int
    available: int
    in_use: int
    start: dt.datetime | None
    end: dt.datetime | None
    upfront_fee: float | None
    currency: str | None

    def reclaimed_from(self) -> dt.datetime | None:
        """When SageMaker starts taking the plan's instances back from the jobs on them (None: no end known)."""
        return None if self.end is None else self.end - RECLAIMED_BEFORE_END

    @classmethod
    def of(cls, described: Mapping[str, Any]) -> PlanState:
        """From a ``DescribeTrainingPlan`` answer or a ``ListTrainingPlans`` summary."""
        capacity = (described.get("ReservedCapacitySummaries") or [{}])[0]
        return cls(
            arn=str(described["TrainingPlanArn"]),
            name=str(described.get("TrainingPlanName") or str(described["TrainingPlanArn"]).rpartition("/")[2]),
            status=str(described.get("Status") or "Unknown"),
            instance_type=capacity.get("InstanceType"),
            total=int(described.get("TotalInstanceCount") or capacity.get("TotalInstanceCount") or 0),
            available=int(described.get("AvailableInstanceCount") or 0),
            in_use=int(described.get("InUseInstanceCount") or 0),
            start=_utc(described.get("StartTime")),
            end=_utc(described.get("EndTime")),
            upfront_fee=_amount(described.get("UpfrontFee")),
            currency=described.get("CurrencyCode"),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arn": self.arn,
            "status": self.status,
            "instance_type": self.instance_type,
            "instance_count": self.total,
            "in_use": self.in_use,
            "available": self.available,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "upfront_fee": self.upfront_fee,
            "currency": self.currency,
        }

    @classmethod
    def from_dict(cls, kept: Mapping[str, Any]) -> PlanState:
        """The inverse of ``as_dict``: a plan as it was listed, kept in the shared store."""
        return cls(
            arn=str(kept["arn"]),
            name=str(kept["name"]),
            status=str(kept["status"]),
            instance_type=None if kept.get("instance_type") is None else str(kept["instance_type"]),
            total=int(kept["instance_count"]),
            available=int(kept.get("available") or 0),
            in_use=int(kept.get("in_use") or 0),
            start=_utc(kept.get("start")),
            end=_utc(kept.get("end")),
            upfront_fee=_amount(kept.get("upfront_fee")),
            currency=kept.get("currency"),
        )

    def instance_hours(self) -> float | None:
        """What the plan reserves, in instance-hours; None when its window is not known."""
        if self.start is None or self.end is None:
            return None
        return self.total * (self.end - self.start).total_seconds() / 3600.0


@dataclass(frozen=True)
class Offering:
    """An offering ``SearchTrainingPlanOfferings`` returned: what ``CreateTrainingPlan`` may buy, for a while."""

    offering_id: str
    instance_type: str
    count: int
    start: dt.datetime | None
    end: dt.datetime | None
    duration_hours: float
    upfront_fee: float | None
    currency: str | None

    @classmethod
    def of(cls, offered: Mapping[str, Any]) -> Offering:
        capacity = (offered.get("ReservedCapacityOfferings") or [{}])[0]
        hours = float(offered.get("DurationHours") or 0) + float(offered.get("DurationMinutes") or 0) / 60.0
        return cls(
            offering_id=str(offered["TrainingPlanOfferingId"]),
            instance_type=str(capacity.get("InstanceType")),
            count=int(capacity.get("InstanceCount") or 0),
            start=_utc(capacity.get("StartTime")),
            end=_utc(capacity.get("EndTime")),
            duration_hours=hours,
            upfront_fee=_amount(offered.get("UpfrontFee")),
            currency=offered.get("CurrencyCode"),
        )

    @classmethod
    def from_dict(cls, kept: Mapping[str, Any]) -> Offering:
        """The inverse of ``as_dict``: an offering kept between runs."""
        return cls(
            offering_id=str(kept["offering_id"]),
            instance_type=str(kept["instance_type"]),
            count=int(kept["instance_count"]),
            start=_utc(kept.get("start")),
            end=_utc(kept.get("end")),
            duration_hours=float(kept["duration_hours"]),
            upfront_fee=_amount(kept.get("upfront_fee")),
            currency=kept.get("currency"),
        )

    @property
    def usd_fee(self) -> float | None:
        """The fee in US dollars, the currency every cost here is in; None for any other currency or none named
        (the package converts nothing: a fee it cannot weigh is an unknown cost, never a number of dollars)."""
        return self.upfront_fee if self.currency == "USD" else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "offering_id": self.offering_id,
            "instance_type": self.instance_type,
            "instance_count": self.count,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "duration_hours": self.duration_hours,
            "upfront_fee": self.upfront_fee,
            "currency": self.currency,
        }


def fee_text(amount: float | None, currency: str | None) -> str:
    """A plan's or an offering's fee as a person reads it: dollars as such, any other currency named."""
    if amount is None:
        return "unknown"
    return f"${amount:,.2f}" if currency == "USD" else f"{amount:,.2f} {currency or '(no currency named)'}"


def call_failed(action: str, error: BaseException, *, buying: bool = False) -> str:
    """A plan call's failure in one line, naming what to check: the endpoint when SageMaker never answered,
    the role when it refused."""
    from airflow_sm_prefs.sagemaker.hooks import error_code

    code = error_code(error) or type(error).__name__
    hint = "check the connection's endpoint and network" if not error_code(error) else "check the connection's role"
    return f"{action} failed: {code}: {str(error)[:300]} ({hint}{'; nothing was bought' if buying else ''})"


def client(connection: Connection) -> Any:
    """A SageMaker client for the connection, with this module's deadlines."""
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    return SageMakerPreferenceHook(**connection.with_call_config(CALL_CONFIG).hook_arguments()).conn


def reservable_types() -> frozenset[str] | None:
    """The instance types a plan can reserve, as the installed botocore's model lists them (a search for any
    other is refused); None when the model does not say."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    try:
        return frozenset(model.shape_for("ReservedCapacityInstanceType").enum)
    except Exception:  # an older botocore without training plans: let SageMaker say
        return None


def account_plans(sagemaker: Any) -> list[PlanState]:
    """Every plan of the account in the client's Region."""
    return listed_plans(sagemaker)[0]


def listed_plans(sagemaker: Any) -> tuple[list[PlanState], dt.datetime]:
    """Every plan of the account in the client's Region, and the service's clock when it listed them (its Date
    header; this host's clock without one): how long a plan has held its instances is counted to then."""
    from airflow_sm_prefs.sagemaker.hooks import service_time

    plans: list[PlanState] = []
    token = None
    answered_at = None
    for _ in range(MAX_PAGES):
        page = sagemaker.list_training_plans(MaxResults=100, **({"NextToken": token} if token else {}))
        answered_at = answered_at or service_time(page)
        plans.extend(PlanState.of(summary) for summary in page.get("TrainingPlanSummaries", []))
        token = page.get("NextToken")
        if not token:
            break
    return plans, dt.datetime.fromtimestamp(answered_at, dt.UTC) if answered_at else dt.datetime.now(dt.UTC)


def plan_named(sagemaker: Any, name_or_arn: str) -> PlanState | None:
    """The plan, or None when SageMaker has none of that name or ARN."""
    from airflow_sm_prefs.sagemaker.hooks import error_code

    # By name: botocore models before the ARN was accepted (1.41, MWAA 3.1.6's pin) hold the member to a
    # name's pattern, and a name is what every model accepts.
    name = name_or_arn.rpartition(":training-plan/")[2] if name_or_arn.startswith("arn:") else name_or_arn
    try:
        plan = PlanState.of(sagemaker.describe_training_plan(TrainingPlanName=name))
    except Exception as error:
        if error_code(error) == "ResourceNotFound":
            return None
        raise
    if name_or_arn.startswith("arn:") and plan.arn != name_or_arn:
        # The account's namesake, not the plan the ARN names (another account, Region or partition): none here.
        return None
    return plan


def search(
    sagemaker: Any, *, instance_type: str, count: int, hours: int, after: dt.datetime, before: dt.datetime
) -> list[Offering]:
    """What SageMaker would sell now for ``count`` x ``instance_type`` over ``hours``, inside the window."""
    answer = sagemaker.search_training_plan_offerings(
        InstanceType=instance_type,
        InstanceCount=count,
        DurationHours=hours,
        StartTimeAfter=after,
        EndTimeBefore=before,
        TargetResources=["training-job"],
    )
    return [Offering.of(offered) for offered in answer.get("TrainingPlanOfferings", [])]


def _utc(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, str):
        try:
            return _utc(dt.datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _amount(value: Any) -> float | None:
    """The upfront fee, which the API gives as text; None when it is not a number."""
    try:
        amount = float(value)
    except (TypeError, ValueError):
        return None
    return amount if amount >= 0 and amount == amount and amount != float("inf") else None
