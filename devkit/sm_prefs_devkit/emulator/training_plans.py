"""Flexible Training Plans as the emulated service sells and runs them: offerings searched from a scenario's
supply of reservable capacity, plans bought from an offering, and each plan's life on the emulator's clock
(``Pending`` while the purchase settles, ``Scheduled`` until its start, ``Active`` until its end, then
``Expired``).

A scenario's ``training_plans`` are plans the account already holds (bought before the run). What the API
reference leaves open, and what this module assumes instead, is the table of guesses in docs/emulator.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sm_prefs_devkit.emulator import paging
from sm_prefs_devkit.emulator.errors import ResourceInUse, ResourceNotFound, ValidationException
from sm_prefs_devkit.emulator.scenario import Scenario

OPERATIONS = ("SearchTrainingPlanOfferings", "CreateTrainingPlan", "DescribeTrainingPlan", "ListTrainingPlans")
WRITES = ("CreateTrainingPlan",)
TRAINING_JOB = "training-job"
HOUR = 3600.0
DEFAULT_DURATION_HOURS = 24
DEFAULT_SEARCH_DAYS = 56  # how far ahead a search without EndTimeBefore looks
OFFERINGS_PER_SEARCH = 3  # start times a day apart, each a separate offering
# SageMaker gives full access to a plan's instances until 30 minutes before its end, then starts terminating
# what runs on them (the developer guide's "Reserved Capacity termination process").
RECLAIM_LEAD_SECONDS = 1800.0
ARN_PREFIX = "arn:aws:sagemaker:{region}:{account}:training-plan/"


@dataclass
class OfferingForSale:
    """An offering a search returned: what ``CreateTrainingPlan`` may buy until it starts or its capacity goes."""

    offering_id: str
    supply: int  # the index of the scenario's supply block it is carved from
    region: str
    instance_type: str
    count: int
    start: float
    end: float
    fee: str
    currency: str
    availability_zone: str


@dataclass
class Plan:
    """A plan the account holds. ``created`` to ``settled`` it is Pending; ``in_use_elsewhere`` counts
    instances taken by work outside this emulator run (a scenario's rehearsal of a plan another team fills)."""

    name: str
    arn: str
    region: str
    instance_type: str
    count: int
    start: float
    end: float | None
    created: float
    settled: float
    fee: str = "0"
    currency: str = "USD"
    supply: int | None = None
    offering_id: str | None = None
    availability_zone: str | None = None
    in_use_elsewhere: int = 0

    def status(self, now: float) -> str:
        if now < self.settled:
            return "Pending"
        if now < self.start:
            return "Scheduled"
        if self.end is None or now < self.end:
            return "Active"
        return "Expired"

    def reclaimed_from(self) -> float | None:
        """When SageMaker starts taking the plan's instances back from the jobs on them (None: never)."""
        return None if self.end is None else self.end - RECLAIM_LEAD_SECONDS

    def usable(self, now: float) -> bool:
        reclaimed = self.reclaimed_from()
        return self.status(now) == "Active" and (reclaimed is None or now < reclaimed)


class PlanBook:
    """The account's plans and the offerings searches have returned, for every Region the emulator serves."""

    def __init__(self, scenario: Scenario, origin: float) -> None:
        self.scenario = scenario
        self.origin = origin
        self.bought: dict[str, Plan] = {}
        self.offerings: dict[str, OfferingForSale] = {}
        self.given = {plan.arn: _given_plan(scenario, plan, origin) for plan in scenario.training_plans}

    def get(self, arn: str) -> Plan | None:
        return self.bought.get(arn) or self.given.get(arn)

    def all(self) -> Iterable[Plan]:
        yield from self.given.values()
        yield from self.bought.values()

    def changes(self) -> list[float]:
        """The times a plan's capacity appears or goes: when waiting jobs must be looked at again."""
        times = []
        for plan in self.all():
            times.append(max(plan.start, plan.settled))
            if plan.end is not None:
                times.append(plan.end)
        return times

    # -- the API --------------------------------------------------------------------------------------------

    def answer(self, operation: str, request: dict[str, Any], region: str, now: float, used: dict[str, int]) -> Any:
        if operation == "SearchTrainingPlanOfferings":
            return self.search(request, region, now)
        if operation == "CreateTrainingPlan":
            return self.create(request, region, now)
        if operation == "DescribeTrainingPlan":
            return self.describe(request["TrainingPlanName"], region, now, used)
        return self.list(request, region, now, used)

    def search(self, request: dict[str, Any], region: str, now: float) -> dict[str, Any]:
        if request.get("UltraServerType") is not None or request.get("UltraServerCount") is not None:
            raise ValidationException("The airflow-sm-prefs emulator does not model UltraServer offerings.")
        if request.get("TrainingPlanArn") is not None:
            raise ValidationException("The airflow-sm-prefs emulator does not model training plan extensions.")
        instance_type, count = request.get("InstanceType"), request.get("InstanceCount")
        if instance_type is None or not count:
            raise ValidationException("InstanceType and a positive InstanceCount are required to search offerings.")
        targets = request.get("TargetResources") or [TRAINING_JOB]
        hours = int(request.get("DurationHours") or DEFAULT_DURATION_HOURS)
        after = max(_seconds(request.get("StartTimeAfter"), now), now)
        before = _seconds(request.get("EndTimeBefore"), after + DEFAULT_SEARCH_DAYS * 86400)
        if before <= after:
            raise ValidationException("EndTimeBefore must be later than StartTimeAfter.")
        found = []
        if TRAINING_JOB in targets:
            for index, block in enumerate(self.scenario.plan_supply):
                if block.instance_type != instance_type or region != (block.region or self.scenario.region):
                    continue
                found.extend(self._carve(index, count, hours, after, before, region))
        offerings = [self._shown(offering, hours, request) for offering in found]
        return {"TrainingPlanOfferings": offerings}

    def _carve(
        self, index: int, count: int, hours: int, after: float, before: float, region: str
    ) -> list[OfferingForSale]:
        block = self.scenario.plan_supply[index]
        opens = self.origin + block.start
        closes = self.origin + block.end
        start = math.ceil(max(after, opens) / HOUR) * HOUR  # plans start on the hour
        found: list[OfferingForSale] = []
        while len(found) < OFFERINGS_PER_SEARCH and start + hours * HOUR <= min(before, closes):
            end = start + hours * HOUR
            if block.count - self._sold(index, start, end) >= count:
                key = f"{index}:{count}:{start}:{hours}"
                offering_id = "tpo-" + hashlib.sha256(key.encode()).hexdigest()[:24]
                found.append(
                    self.offerings.setdefault(
                        offering_id,
                        OfferingForSale(
                            offering_id,
                            index,
                            region,
                            block.instance_type,
                            count,
                            start,
                            end,
                            f"{block.usd_per_instance_hour * count * hours:.2f}",
                            "USD",
                            block.availability_zone or f"{region}a",
                        ),
                    )
                )
            start += 86400
        return found

    def _sold(self, index: int, start: float, end: float) -> int:
        return sum(
            plan.count
            for plan in self.bought.values()
            if plan.supply == index and plan.start < end and (plan.end is None or start < plan.end)
        )

    def _shown(self, offering: OfferingForSale, hours: int, request: dict[str, Any]) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "TrainingPlanOfferingId": offering.offering_id,
            "TargetResources": [TRAINING_JOB],
            "DurationHours": hours,
            "DurationMinutes": 0,
            "UpfrontFee": offering.fee,
            "CurrencyCode": offering.currency,
            "ReservedCapacityOfferings": [
                {
                    "ReservedCapacityType": "Instance",
                    "InstanceType": offering.instance_type,
                    "InstanceCount": offering.count,
                    "AvailabilityZone": offering.availability_zone,
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "StartTime": offering.start,
                    "EndTime": offering.end,
                }
            ],
        }
        for member, echoed in (
            ("StartTimeAfter", "RequestedStartTimeAfter"),
            ("EndTimeBefore", "RequestedEndTimeBefore"),
        ):
            if request.get(member) is not None:
                shown[echoed] = request[member]
        return shown

    def create(self, request: dict[str, Any], region: str, now: float) -> dict[str, Any]:
        name = request["TrainingPlanName"]
        arn = ARN_PREFIX.format(region=region, account=self.scenario.account_id) + name
        if any(plan.name.lower() == name.lower() and plan.region == region for plan in self.all()):
            raise ResourceInUse(f"Training plan {name} already exists.")
        offering = self.offerings.get(request["TrainingPlanOfferingId"])
        if offering is None or offering.region != region or offering.start <= now:
            raise ResourceNotFound(
                f"Training plan offering {request['TrainingPlanOfferingId']} does not exist or is no longer available."
            )
        block = self.scenario.plan_supply[offering.supply]
        if block.count - self._sold(offering.supply, offering.start, offering.end) < offering.count:
            raise ResourceNotFound(
                f"Training plan offering {offering.offering_id} is no longer available: its capacity was reserved."
            )
        self.bought[arn] = Plan(
            name=name,
            arn=arn,
            region=region,
            instance_type=offering.instance_type,
            count=offering.count,
            start=offering.start,
            end=offering.end,
            created=now,
            settled=now + self.scenario.behaviour.training_plan_pending_seconds,
            fee=offering.fee,
            currency=offering.currency,
            supply=offering.supply,
            offering_id=offering.offering_id,
            availability_zone=offering.availability_zone,
        )
        return {"TrainingPlanArn": arn}

    def find(self, name_or_arn: str, region: str) -> Plan:
        name = name_or_arn.rpartition("training-plan/")[2] if name_or_arn.startswith("arn:") else name_or_arn
        for plan in self.all():
            if plan.region == region and plan.name.lower() == name.lower():
                return plan
        raise ResourceNotFound(f"Training plan {name_or_arn} does not exist.")

    def describe(self, name_or_arn: str, region: str, now: float, used: dict[str, int]) -> dict[str, Any]:
        plan = self.find(name_or_arn, region)
        shown = self._summary(plan, now, used)
        shown["UnhealthyInstanceCount"] = 0
        return shown

    def _summary(self, plan: Plan, now: float, used: dict[str, int]) -> dict[str, Any]:
        status = plan.status(now)
        in_use = plan.in_use_elsewhere + used.get(plan.arn, 0)
        available = max(0, plan.count - in_use) if status == "Active" else 0
        summary: dict[str, Any] = {
            "TrainingPlanArn": plan.arn,
            "TrainingPlanName": plan.name,
            "Status": status,
            "StartTime": plan.start,
            "UpfrontFee": plan.fee,
            "CurrencyCode": plan.currency,
            "TotalInstanceCount": plan.count,
            "AvailableInstanceCount": available,
            "InUseInstanceCount": in_use if status == "Active" else 0,
            "TargetResources": [TRAINING_JOB],
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": plan.arn.replace(":training-plan/", ":reserved-capacity/"),
                    "ReservedCapacityType": "Instance",
                    "InstanceType": plan.instance_type,
                    "TotalInstanceCount": plan.count,
                    "Status": status,
                    "StartTime": plan.start,
                    **({"AvailabilityZone": plan.availability_zone} if plan.availability_zone else {}),
                    **({"EndTime": plan.end} if plan.end is not None else {}),
                }
            ],
        }
        if plan.end is not None:
            summary["EndTime"] = plan.end
            minutes = round((plan.end - plan.start) / 60)
            summary["DurationHours"], summary["DurationMinutes"] = divmod(minutes, 60)
        if status == "Pending":
            summary["StatusMessage"] = "The training plan's payment is being processed."
        return summary

    def list(self, request: dict[str, Any], region: str, now: float, used: dict[str, int]) -> dict[str, Any]:
        plans = [plan for plan in self.all() if plan.region == region]
        after, before = request.get("StartTimeAfter"), request.get("StartTimeBefore")
        if after is not None:
            plans = [plan for plan in plans if plan.start >= _seconds(after, 0.0)]
        if before is not None:
            plans = [plan for plan in plans if plan.start <= _seconds(before, 0.0)]
        for condition in request.get("Filters") or []:
            if condition["Name"] == "Status":
                plans = [plan for plan in plans if plan.status(now) == condition["Value"]]
        sort_by = request.get("SortBy", "StartTime")
        order = {
            "TrainingPlanName": lambda plan: (plan.name.lower(), plan.start),
            "StartTime": lambda plan: (plan.start, plan.name.lower()),
            "Status": lambda plan: (plan.status(now), plan.start),
        }[sort_by]
        plans.sort(key=order, reverse=request.get("SortOrder", "Ascending") == "Descending")
        first = paging.offset(request.get("NextToken"), request, "ListTrainingPlans", ValidationException)
        size = int(request.get("MaxResults") or 50)
        page = plans[first : first + size]
        result: dict[str, Any] = {"TrainingPlanSummaries": [self._summary(plan, now, used) for plan in page]}
        if first + size < len(plans):
            result["NextToken"] = paging.token(request, "ListTrainingPlans", first + size)
        return result

    # -- persistence ----------------------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "bought": [dataclasses.asdict(plan) for plan in self.bought.values()],
            "offerings": [dataclasses.asdict(offering) for offering in self.offerings.values()],
        }

    def restore(self, state: dict[str, Any]) -> None:
        for raw in state.get("bought", []):
            plan = Plan(**raw)
            self.bought[plan.arn] = plan
        for raw in state.get("offerings", []):
            offering = OfferingForSale(**raw)
            self.offerings[offering.offering_id] = offering


def _given_plan(scenario: Scenario, plan: Any, origin: float) -> Plan:
    region = plan.arn.split(":")[3] or scenario.region
    return Plan(
        name=plan.arn.rpartition("/")[2],
        arn=plan.arn,
        region=region,
        instance_type=plan.instance_type,
        count=plan.count,
        start=origin + plan.start,
        end=None if plan.end is None else origin + plan.end,
        created=origin,
        settled=origin,
        in_use_elsewhere=plan.in_use,
    )


def _seconds(value: Any, default: float) -> float:
    """A timestamp member as botocore's JSON protocol sends it (epoch seconds)."""
    if value is None:
        return default
    return float(value)
