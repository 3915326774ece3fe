"""``training_plans="auto"``, just before the create call, training only.

It puts the account's plan that can take the job first: the listed entry of the plan's
type and a count it holds moves to the front with the plan's ARN, so reserved instances already paid for are
tried before on-demand ones. The record says which plan was put first, or why each plan of a listed type was
not (the record's ``training_plan``).

The decisions are pure (plans in, reasons out), shared with ``named_plans`` (the plans written into a list by
hand); ``PlansReader`` reads the plans with short deadlines, and a failure to read them costs the check with
one warning, never the task: SageMaker still decides at placement.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pendulum

from airflow_sm_prefs.facts.record import TrainingPlanChoice
from airflow_sm_prefs.platform.formatting import format_seconds
from airflow_sm_prefs.preflight.check import Arguments, Check, Listed, Run
from airflow_sm_prefs.preflight.entries import Entry, entries
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.pending_limit import pending_limit
from airflow_sm_prefs.request.preferences import RequestValidationError
from airflow_sm_prefs.sagemaker.training_plans import BECOMING_USABLE, USABLE, PlanState


@dataclass(frozen=True)
class PlansFirst(Check):
    """``training_plans="auto"``: the account's plan that can take the job put first, past what the guardrails
    and ``finish_by`` left; the choice in the log and for the record."""

    arguments = ("training_plans",)

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> PlansFirst | None:
        value = given.get("training_plans")
        if value is None:
            return None
        if value != "auto":
            raise RequestValidationError([f"training_plans must be 'auto' or None, got {value!r:.60}"])
        if not kind.takes_training_plans:
            raise RequestValidationError(
                [
                    f"training_plans='auto' is for training jobs: SageMaker runs {kind.name} jobs on on-demand "
                    "capacity only (a processing entry cannot name a training plan)"
                ]
            )
        return cls()

    def before_create(self, run: Run, listed: Listed) -> Listed:
        listed = listed.settle(run)
        now = pendulum.now("UTC")
        account_plans = PlansReader(run.account.plans_client, run.log).account_plans()
        request = listed.request
        if account_plans is None:
            choice = PlanChoice(None, ("the account's training plans could not be read",))
        else:
            limit = pending_limit(run.kind, request, start=now, max_pending=None, until=listed.pending_until)
            request, choice = put_first(run.kind, request, account_plans, now=now, pending=limit.wait.total_seconds())
        for note in choice.notes:
            run.log.info("training_plans='auto': %s", note)
        return dataclasses.replace(listed, request=request, training_plan=choice.as_record())


def unusable(plan: PlanState, entry: Entry, now: dt.datetime, pending: float) -> str | None:
    """Why ``plan`` cannot take ``entry``'s job if it is created ``now`` and may wait ``pending`` seconds; None
    when it can (Active with enough free instances, or becoming Active before the job would stop waiting)."""
    if plan.instance_type is not None and plan.instance_type != entry.instance_type:
        return f"reserves {plan.instance_type}, not {entry.instance_type}"
    if plan.total < entry.count:
        return f"reserves {plan.total} instance(s), fewer than the {entry.count} asked for"
    if plan.status == "Expired" or (plan.end is not None and plan.end <= now):
        return f"expired{f' at {plan.end.isoformat()}' if plan.end else ''}"
    reclaimed = plan.reclaimed_from()
    if reclaimed is not None and reclaimed <= now:
        return (
            f"ends within 30 minutes (at {plan.end.isoformat() if plan.end else reclaimed.isoformat()}): SageMaker "
            "takes a plan's instances back from then on, and a job started now would be terminated"
        )
    if plan.status in USABLE:
        if plan.available < entry.count:
            return f"is full: {plan.in_use} of its {plan.total} instances in use, {plan.available} free"
        return None
    if plan.status in BECOMING_USABLE:
        if plan.start is not None and plan.start <= now + dt.timedelta(seconds=pending):
            return None
        starts = plan.start.isoformat() if plan.start else "an unknown time"
        return (
            f"is {plan.status} and not Active until {starts}, after the job would stop waiting "
            f"({format_seconds(pending)} from now)"
        )
    return f"is {plan.status}"


@dataclass(frozen=True)
class PlanChoice:
    """What ``training_plans="auto"`` did: the plan put first (None: none) and why, one line per plan looked at."""

    plan_arn: str | None
    notes: tuple[str, ...] = ()

    def as_record(self) -> TrainingPlanChoice:
        return TrainingPlanChoice(plan_arn=self.plan_arn, notes=list(self.notes))


def put_first(
    kind: JobKind, request: dict[str, Any], plans: Sequence[PlanState], *, now: dt.datetime, pending: float
) -> tuple[dict[str, Any], PlanChoice]:
    """The request with the first plan that can take the job put first, on the entry of its type; unchanged
    when none can, with the reasons."""
    listed = entries(kind, request)
    if any(entry.plan_backed for entry in listed):
        return request, PlanChoice(None, ("the list already names a training plan; it is left as written",))
    notes: list[str] = []
    for entry in listed:
        # Active plans with the most room first, then those starting soonest: the likeliest to take the job.
        matching = sorted(
            (plan for plan in plans if plan.instance_type == entry.instance_type),
            key=lambda plan: (plan.status not in USABLE, -plan.available, plan.start or now, plan.name),
        )
        for plan in matching:
            reason = unusable(plan, entry, now, pending)
            if reason is None:
                return _moved_first(kind, request, entry, plan), PlanChoice(plan.arn, (*notes, _chosen(plan, entry)))
            notes.append(f"training plan {plan.name}: {reason}")
    if not notes:
        types = ", ".join(sorted({entry.instance_type for entry in listed}))
        notes.append(f"no training plan of the account reserves a listed type ({types})")
    return request, PlanChoice(None, tuple(notes))


def _chosen(plan: PlanState, entry: Entry) -> str:
    when = "now" if plan.status in USABLE else f"from {plan.start.isoformat() if plan.start else 'its start'}"
    return (
        f"training plan {plan.name} put first for {entry.label}: {plan.available} of its {plan.total} reserved "
        f"instances free {when}"
    )


def _moved_first(kind: JobKind, request: dict[str, Any], entry: Entry, plan: PlanState) -> dict[str, Any]:
    """A new request, the one given left as it is, with ``entry`` first and on ``plan``."""
    changed = copy.deepcopy(request)
    resources = kind.ensure_resources(changed)
    others = [api for rank, api in enumerate(resources["InstancePreferences"]) if rank != entry.rank]
    resources["InstancePreferences"] = [{**entry.api, "TrainingPlanArns": [plan.arn]}, *others]
    return changed


@dataclass
class PlansReader:
    """The account's plans, read once per create call through ``client`` (a SageMaker client factory); a
    failure to read is logged once and read as "unknown" (None), never raised."""

    client_factory: Callable[[], Any]
    log: Any
    _named: dict[str, PlanState | None] = field(default_factory=dict)
    _client: Any = None

    def client(self) -> Any:
        if self._client is None:  # one client (one read of the connection) per create call
            self._client = self.client_factory()
        return self._client

    def account_plans(self) -> list[PlanState] | None:
        from airflow_sm_prefs.sagemaker import training_plans

        try:
            return training_plans.account_plans(self.client())
        except Exception as error:
            self._could_not_read(error)
            return None

    def named(self, arn: str) -> tuple[bool, PlanState | None]:
        """(known, plan): whether SageMaker could be asked, and the plan it has of that ARN (None: no such plan)."""
        from airflow_sm_prefs.sagemaker import training_plans

        if arn not in self._named:
            try:
                self._named[arn] = training_plans.plan_named(self.client(), arn)
            except Exception as error:
                self._could_not_read(error)
                return False, None
        return True, self._named[arn]

    def _could_not_read(self, error: BaseException) -> None:
        self.log.warning(
            "Training plans not checked: could not read them from SageMaker (%s: %s); check the connection's "
            "sagemaker:ListTrainingPlans and sagemaker:DescribeTrainingPlan permissions. SageMaker still skips a "
            "plan that cannot take the job.",
            type(error).__name__,
            str(error)[:200],
        )
