"""What a preflight check is: the arguments it reads, when it can run, and what it does to the list.

A check is judged from the operator's arguments when the operator is built (``from_arguments``: the check, or
None when its arguments leave it off; ``RequestValidationError`` for a bad argument). It may then judge a
static list when the DAG file is parsed, with no network call (``at_parse``), and it judges the rendered list
just before the create call (``before_create``), where it refuses the task, objects to entries, or adjusts the
request. The checks are listed once, in ``registry``; the runner carries a ``Listed`` through them in order.

Two kinds of check share this shape:

- a guardrail (``EntryCheck``) objects to entries by rank, each with a reason, judged on the list as the user
  gave it; ``on_violation`` then refuses the task or drops them all at once, the first reason kept per entry;
- an adjustment (certification's warnings, ``finish_by``, ``training_plans``) works on what the guardrails
  left, and says what it changed.
"""

from __future__ import annotations

import copy
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self

from airflow_sm_prefs.facts.record import DroppedPreference, PreflightDecided, TrainingPlanChoice
from airflow_sm_prefs.preflight import guardrails
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker.connection import Connection

if TYPE_CHECKING:
    import pendulum
    from airflow.sdk import Context

# The operator's preflight arguments by name, handed on as one value (a name not given reads as None).
Arguments = Mapping[str, Any]


@dataclass(frozen=True)
class Account:
    """Where the job would run, as the checks that ask AWS need it; each client is built only if used."""

    region: str | None
    quota_client: Callable[[], Any]
    cache_key: tuple[Any, ...]  # one cached reading of the quotas per connection, Region and endpoint
    plans_client: Callable[[], Any]  # SageMaker with short deadlines

    @classmethod
    def of(cls, connection: Connection, endpoint_url: str | None) -> Account:
        """The account behind ``connection``, in its Region (the job's)."""

        def quota_client() -> Any:
            from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

            return AwsBaseHook(**connection.hook_arguments(), client_type="service-quotas").get_conn()

        def plans_client() -> Any:
            from airflow_sm_prefs.sagemaker import training_plans

            return training_plans.client(connection)

        region = connection.region_name
        return cls(region, quota_client, (connection.aws_conn_id, region, endpoint_url), plans_client)


@dataclass(frozen=True)
class Run:
    """What a check may use just before the create call."""

    kind: JobKind
    context: Context
    account: Account
    log: Any
    on_violation: guardrails.OnViolation


class Prepared(NamedTuple):
    """What preflight makes of the rendered request, just before a job is created from it: the request to send,
    and what the record says of the list (kept with the task instance's claim, so that a retry which reattaches
    to the job records it too)."""

    request: dict[str, Any]
    # When the task itself must stop a job still waiting for capacity (SageMaker cannot: finish_by below its
    # pending floor, or a processing job); a time here, text only in the claim and the job's tag.
    pending_until: pendulum.DateTime | None = None
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
class Listed:
    """The list as preflight leaves it so far. ``given`` is the rendered request, whose ranks are the user's
    own; ``objections`` are the guardrails', until ``settled`` applies them to make ``request``."""

    given: dict[str, Any]
    request: dict[str, Any]
    objections: Mapping[int, str] = dataclasses.field(default_factory=dict)
    settled: bool = False
    dropped: tuple[DroppedPreference, ...] = ()
    pending_until: pendulum.DateTime | None = None
    uncertified: tuple[str, ...] = ()
    training_plan: TrainingPlanChoice | None = None

    @classmethod
    def of(cls, request: dict[str, Any]) -> Listed:
        """``given`` is a copy of its own: no adjustment of ``request`` can change the list as given."""
        return cls(copy.deepcopy(request), request)

    def objected(self, violations: Mapping[int, str]) -> Listed:
        """With a guardrail's objections added; an entry objected to already keeps its first reason."""
        if self.settled:
            raise RuntimeError("a guardrail ran after the list was settled: list it before the adjustments")
        return dataclasses.replace(self, objections={**violations, **self.objections})

    def settle(self, run: Run) -> Listed:
        """The guardrails' objections applied by ``on_violation`` (refused, or dropped and logged), once."""
        if self.settled:
            return self
        request, dropped = guardrails.apply(run.kind, self.given, self.objections, run.on_violation)
        for removed in dropped:
            run.log.warning("Dropped %s", removed["reason"])
        return dataclasses.replace(self, request=request, settled=True, dropped=tuple(dropped))

    def dropping(self, run: Run, reasons: Mapping[int, str]) -> Listed:
        """With more entries of the list as given dropped (each logged) after it is settled: the drops are applied
        to the list as given, earlier ones first, so that every recorded rank is still the user's own."""
        settled = self.settle(run)
        earlier = {removed["rank"]: removed["reason"] for removed in settled.dropped}
        # Drops are made afresh on the list as given, so a change an adjustment made to ``request`` before this
        # would be silently lost: refused, as a guardrail after ``settle`` is.
        if settled.request != guardrails.apply(run.kind, settled.given, earlier, "drop")[0]:
            raise RuntimeError("entries were dropped after an adjustment changed the list: list the check earlier")
        request, dropped = guardrails.apply(run.kind, settled.given, {**reasons, **earlier}, "drop")
        for removed in dropped:
            if removed["rank"] not in earlier:
                run.log.warning("Dropped %s", removed["reason"])
        return dataclasses.replace(settled, request=request, dropped=tuple(dropped))

    def prepared(self) -> Prepared:
        """What the create call and the record take from the list once every check has run."""
        return Prepared(self.request, self.pending_until, self.dropped, self.uncertified, self.training_plan)


class Check(ABC):
    """One check of a preference list before any job exists."""

    arguments: ClassVar[tuple[str, ...]] = ()  # the operator arguments it reads
    templated: ClassVar[tuple[str, ...]] = ()  # those of them Airflow renders before the run

    @classmethod
    @abstractmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> Self | None:
        """The check the arguments ask for, or None when they leave it off."""

    def at_parse(self, kind: JobKind, request: dict[str, Any], on_violation: guardrails.OnViolation) -> None:
        """Refuse a static list when the DAG file is parsed (``RequestValidationError``), with no network call.
        Most checks need the run to judge, so by default this judges nothing."""
        return None

    @abstractmethod
    def before_create(self, run: Run, listed: Listed) -> Listed:
        """The list past this check, just before the create call; ``RequestValidationError`` refuses the task."""


class EntryCheck(Check):
    """A guardrail: the entries of the list as given that it objects to, by rank, each with its reason."""

    @abstractmethod
    def violations(self, run: Run, request: Mapping[str, Any]) -> dict[int, str]: ...

    def before_create(self, run: Run, listed: Listed) -> Listed:
        return listed.objected(self.violations(run, listed.given))
