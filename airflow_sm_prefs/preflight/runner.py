"""Preflight: everything judged about a preference list before a job is created from it.

Certification (is each configuration known to work for the workload), the guardrails (hardware, cost caps,
quotas) and ``finish_by`` (can each entry still finish in time) run twice: on the static list when the DAG file
is parsed, where what they can judge without the network fails the import; and on the rendered request, just
before the create call, where they refuse the task or shorten the list and record what they dropped. A refusal
never leaves a job behind: nothing is claimed or created until preflight has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import pendulum

from airflow_sm_prefs.evidence.record import DroppedPreference, PreflightDecided, TrainingPlanChoice
from airflow_sm_prefs.platform.formatting import format_seconds
from airflow_sm_prefs.preflight import certification, entries, guardrails, requirements
from airflow_sm_prefs.preflight import finish_by as finish_by_module
from airflow_sm_prefs.request import job_request
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError, template_markers

if TYPE_CHECKING:
    from airflow.sdk import Context


class Prepared(NamedTuple):
    """What preflight makes of the rendered request, just before a job is created from it: the request to send,
    and what the record says of the list (kept with the task instance's claim, so that a retry which reattaches
    to the job records it too)."""

    request: dict[str, Any]
    pending_until: str | None = None
    dropped: tuple[DroppedPreference, ...] = ()
    uncertified: tuple[str, ...] = ()
    training_plan: TrainingPlanChoice | None = None

    @property
    def decided(self) -> PreflightDecided:
        return PreflightDecided(
            dropped_preferences=list(self.dropped),
            uncertified_preferences=list(self.uncertified),
            training_plan=self.training_plan,
        )


@dataclass(frozen=True)
class Account:
    """Where the job would run, as the quota check needs it."""

    region: str | None
    quota_client: Callable[[], Any]  # built only if the quota check runs
    cache_key: tuple[Any, ...]  # one cached reading of the quotas per connection, Region and endpoint
    plans_client: Callable[[], Any]  # SageMaker with short deadlines, built only if a training plan is looked up

    @classmethod
    def of(cls, hook_kwargs: Mapping[str, Any], region: str | None, endpoint_url: str | None) -> Account:
        def quota_client() -> Any:
            from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

            return AwsBaseHook(**{**hook_kwargs, "region_name": region}, client_type="service-quotas").get_conn()

        def plans_client() -> Any:
            from airflow_sm_prefs.sagemaker import training_plans

            return training_plans.client({**hook_kwargs, "region_name": region})

        return cls(region, quota_client, (hook_kwargs.get("aws_conn_id"), region, endpoint_url), plans_client)


@dataclass(frozen=True)
class Preflight:
    kind: JobKind
    guardrails: guardrails.Guardrails
    certification: certification.Certification
    finish_by: datetime | str | None
    training_plans: Literal["auto"] | None = None

    @classmethod
    def of(cls, task: Any) -> Preflight:
        """The preflight of an operator, from its arguments as they stand (templates rendered or not)."""
        return cls.judged(
            task.job_kind,
            max_hourly_cost_usd=task.max_hourly_cost_usd,
            max_cost_usd=task.max_cost_usd,
            on_violation=task.on_violation,
            quota_preflight=task.quota_preflight,
            requires=task.requires,
            finish_by=task.finish_by,
            workload=task.workload,
            certified=task.certified,
            certification_registry=task.certification_registry,
            training_plans=task.training_plans,
        )

    @classmethod
    def judged(
        cls,
        kind: JobKind,
        *,
        max_hourly_cost_usd: Any,
        max_cost_usd: Any,
        on_violation: Any,
        quota_preflight: Any,
        requires: Any,
        finish_by: Any,
        workload: Any,
        certified: Any,
        certification_registry: Any,
        training_plans: Any = None,
    ) -> Preflight:
        """The operator's preflight arguments, each judged; ``RequestValidationError`` names every bad one."""
        checks = guardrails.Guardrails.judged(
            max_hourly_cost_usd, max_cost_usd, on_violation, quota_preflight, requires
        )
        finish_by_module.judged(finish_by)
        certifying = certification.Certification.judged(workload, certified, certification_registry)
        if training_plans is None:  # the default: the plans' module is not even loaded
            return cls(kind, checks, certifying, finish_by)
        from airflow_sm_prefs.preflight import plans_first

        return cls(kind, checks, certifying, finish_by, plans_first.judged(training_plans, kind))

    def at_parse(self, request: dict[str, Any], markers: tuple[str, ...]) -> None:
        """What a static list can be refused for when the DAG file is parsed, with no network call."""
        if self.certification.mode == "strict" and self.certification.checked_at_parse:
            # A static list naming an uncertified configuration fails the DAG import (with a local registry;
            # a remote one is read just before the job would be created).
            with job_request.refusing():
                self._refuse_uncertified(request)
        if self.guardrails.requires is not None and self.guardrails.on_violation == "fail":
            # A static list that cannot meet requires= fails the DAG import; with "drop", the run decides.
            with job_request.refusing(), template_markers(markers):
                violations = requirements.MeetsRequirements(self.guardrails.requires).violations(self.kind, request)
                guardrails.apply(self.kind, request, violations, "fail")

    def before_create(self, context: Context, request: dict[str, Any], account: Account, log: Any) -> Prepared:
        """The rendered request just before a job is created from it: refused, or shortened with what was dropped
        (``dropped``), what ``certified="warn"`` let by (``uncertified``) and the plan put first, if asked."""
        uncertified: list[str] = []
        choice = None
        with job_request.refusing():
            if self.certification.mode == "strict":
                self._refuse_uncertified(request)
            elif self.certification.mode == "warn":
                uncertified = self._uncertified(request, "warn", log)
                for problem in uncertified:
                    log.warning("Uncertified %s", problem)
            plans_client = account.plans_client if self.kind.takes_training_plans else None
            checks = guardrails.checks_for(
                self.guardrails, account.region, account.quota_client, account.cache_key, log, plans_client
            )
            guarded, dropped = guardrails.enforce(self.kind, request, checks, self.guardrails.on_violation, log)
            pending_until = None
            if self.finish_by is not None:
                # Judged on the full list, past what the guardrails dropped, so ranks stay the user's own.
                guarded, dropped, pending_until = self._fitted_to_deadline(context, request, dropped, log)
            if self.training_plans == "auto":
                guarded, choice = self._plan_put_first(guarded, account.plans_client, pending_until, log)
            # What is left is still a request SageMaker accepts; warn of what only the changes brought
            # (a list left with CPU types only makes a pending bound meaningless).
            already_warned = set(self.kind.validate(request))
            for warning in self.kind.validate(guarded):
                if warning not in already_warned:
                    log.warning(warning)
        return Prepared(guarded, pending_until, tuple(dropped), tuple(uncertified), choice)

    def _plan_put_first(
        self, request: dict[str, Any], plans_client: Callable[[], Any], pending_until: str | None, log: Any
    ) -> tuple[dict[str, Any], TrainingPlanChoice]:
        """``training_plans="auto"``: the account's plan that can take the job first; the choice in the log and
        for the record."""
        from airflow_sm_prefs.preflight import plans_first

        now = pendulum.now("UTC")
        account_plans = plans_first.PlansReader(plans_client, log).account_plans()
        if account_plans is None:
            choice = plans_first.PlanChoice(None, ("the account's training plans could not be read",))
        else:
            until = pendulum.parse(pending_until) if pending_until else None
            pending = plans_first.pending_seconds(request, until if isinstance(until, datetime) else None, now)
            request, choice = plans_first.put_first(self.kind, request, account_plans, now, pending)
        for note in choice.notes:
            log.info("training_plans='auto': %s", note)
        return request, choice.as_record()

    def _uncertified(
        self, request: Mapping[str, Any], if_unreadable: Literal["refuse", "warn"], log: Any = None
    ) -> list[str]:
        """What the registry does not certify. A store that cannot be read refuses the job (``"refuse"``: the
        task fails and may retry; no job), or costs the check with a warning in ``log`` (``"warn"``)."""
        listed = [(e.instance_type, e.count, e.label) for e in entries.entries(self.kind, request)]
        try:
            return self.certification.uncertified(listed)
        except certification.RegistryError as error:
            raise RequestValidationError([str(error)]) from None
        except certification.RegistryUnreachable as error:
            if if_unreadable == "refuse" or log is None:
                raise certification.RegistryUnreachable(
                    f"{error}; certified='strict' checks the list first, so no SageMaker job was created"
                ) from error
            log.warning("Certification not checked: %s", error)
            return []

    def _refuse_uncertified(self, request: Mapping[str, Any]) -> None:
        uncertified = self._uncertified(request, "refuse")
        if uncertified:
            raise RequestValidationError(
                [*uncertified, "certified='strict' lists certified configurations only; no SageMaker job was created"]
            )

    def _fitted_to_deadline(
        self, context: Context, request: dict[str, Any], guarded_out: list[DroppedPreference], log: Any
    ) -> tuple[dict[str, Any], list[DroppedPreference], str | None]:
        ti = context["ti"]
        now = pendulum.now("UTC")
        earlier = {removed["rank"]: removed["reason"] for removed in guarded_out}
        deadline = finish_by_module.plan(
            self.kind,
            request,
            finish_by_module.deadline_of(self.finish_by),
            now,
            finish_by_module.ledger_history(ti.dag_id, ti.task_id, self.kind),
            excluded=earlier,
        )
        request, dropped = guardrails.apply(self.kind, request, {**deadline.dropped, **earlier}, "drop")
        for removed in dropped:
            if removed["rank"] in deadline.dropped:
                log.warning("Dropped %s", removed["reason"])
        request, pending_until = finish_by_module.applied(self.kind, request, deadline, now)
        log.info(
            "finish_by=%s: the job may wait for capacity %s, until %s (the longest expected run kept: %s), %s",
            deadline.finish_by.to_iso8601_string(),
            format_seconds(deadline.pending_seconds),
            now.add(seconds=deadline.pending_seconds).to_iso8601_string(),
            format_seconds(max(deadline.expected_seconds.values())),
            "enforced by this task" if pending_until else "as MaxPendingTimeInSeconds",
        )
        return request, dropped, pending_until
