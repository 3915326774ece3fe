"""Preflight: everything judged about a preference list before a job is created from it.

The checks of ``registry`` (certification, the guardrails, ``finish_by``, ``training_plans``) run twice: on the
static list when the DAG file is parsed, where what they can judge without the network fails the import; and on
the rendered request, just before the create call, where they refuse the task or shorten the list and record
what they dropped. A refusal never leaves a job behind: nothing is claimed or created until preflight has passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from airflow_sm_prefs.preflight import certification, guardrails, registry
from airflow_sm_prefs.preflight.certified import CertifiedOnly
from airflow_sm_prefs.preflight.check import Account, Arguments, Check, Listed, Prepared, Run
from airflow_sm_prefs.request import job_request
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError, template_markers

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.preflight.requirements import InstanceRequirements

__all__ = ["Account", "Preflight", "PreflightArguments", "Prepared"]


class PreflightArguments:
    """The operator arguments the shipped checks read, declared once: the operators hold each as an attribute of
    this type (Airflow renders the templated ones), which mypy and an IDE see. A check added to the registry
    beyond these still reaches its argument through the operator's ``**kwargs``."""

    on_violation: guardrails.OnViolation
    max_hourly_cost_usd: float | str | None
    max_cost_usd: float | str | None
    quota_preflight: bool
    requires: InstanceRequirements | Mapping[str, Any] | None
    finish_by: datetime | str | None
    workload: str | None
    certified: certification.Mode | None
    certification_registry: str | None
    training_plans: Literal["auto"] | None


@dataclass(frozen=True)
class Preflight:
    """The checks a task's arguments turn on, in the registry's order."""

    kind: JobKind
    on_violation: guardrails.OnViolation
    checks: tuple[Check, ...]

    @classmethod
    def of(cls, kind: JobKind, given: Arguments) -> Preflight:
        """The operator's preflight arguments (as they stand, templates rendered or not), each judged;
        ``RequestValidationError`` names every bad one."""
        problems: list[str] = []
        on_violation: guardrails.OnViolation = "fail"
        try:
            on_violation = guardrails.judged_on_violation(given.get("on_violation", "fail"))
        except RequestValidationError as error:
            problems.extend(error.problems)
        checks: list[Check] = []
        for check in registry.CHECKS:
            try:
                judged = check.from_arguments(kind, given)
            except RequestValidationError as error:
                problems.extend(error.problems)
                continue
            if judged is not None:
                checks.append(judged)
        if problems:
            raise RequestValidationError(problems)
        return cls(kind, on_violation, tuple(checks))

    # The operator reaches preflight through this class alone (its one seam, which keeps the operator module's
    # imports few: test_shape), so the registry's names are handed on from here.
    @staticmethod
    def argument_names() -> tuple[str, ...]:
        """The operator arguments preflight reads: every check's that the registry lists."""
        return registry.ARGUMENTS

    @staticmethod
    def templated_arguments() -> tuple[str, ...]:
        return registry.TEMPLATED_ARGUMENTS

    @staticmethod
    def arguments_of(task: PreflightArguments) -> dict[str, Any]:
        """An operator's preflight arguments, as one value (an argument no check of this version declares is
        read as the operator's ``**kwargs`` set it)."""
        return {name: getattr(task, name, None) for name in registry.ARGUMENTS}

    @staticmethod
    def certification_of(kind: JobKind, given: Arguments) -> certification.Certification:
        """What a resumed task needs of preflight: the certification its record names. The other arguments were
        judged when the job was to be created, and nothing after that reads them."""
        return CertifiedOnly.from_arguments(kind, given).certification

    @property
    def certification(self) -> certification.Certification:
        """The task's workload and registry, for the record's certified run time."""
        found = next(check for check in self.checks if isinstance(check, CertifiedOnly))
        return found.certification

    def at_parse(self, request: dict[str, Any], markers: tuple[str, ...]) -> None:
        """What a static list can be refused for when the DAG file is parsed, with no network call."""
        with job_request.refusing(), template_markers(markers):
            for check in self.checks:
                check.at_parse(self.kind, request, self.on_violation)

    def before_create(self, context: Context, request: dict[str, Any], account: Account, log: Any) -> Prepared:
        """The rendered request just before a job is created from it: refused, or shortened with what was dropped,
        what ``certified="warn"`` let by and the plan put first, if asked."""
        run = Run(self.kind, context, account, log, self.on_violation)
        listed = Listed.of(request)
        with job_request.refusing():
            for check in self.checks:
                listed = check.before_create(run, listed)
            listed = listed.settle(run)
            # What is left is still a request SageMaker accepts; warn of what only the changes brought
            # (a list left with CPU types only makes a pending bound meaningless).
            already_warned = set(self.kind.validate(request))
            for warning in self.kind.validate(listed.request):
                if warning not in already_warned:
                    log.warning(warning)
        return listed.prepared()
