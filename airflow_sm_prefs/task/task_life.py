"""A task's life with its job, one state machine for both ways of waiting.

::

    start ──► submit (claim, preflight, create or reattach) ──► follow ──► ended ─────────────► Done
                                                                  │                               ▲
                                                                  ▼                               │
                                   resume(WaitEnded) ──► after ◄── wait (deferred: one Defer, whose │
                                                          │        trigger announces the selection; │
                                                          │        blocking: the loop here, which   │
                                                          │        announces it, then after)        │
                                                          ├── finished ─────────────────────────────┘
                                                          ├── selected (an older trigger): announce, wait again
                                                          └── no capacity in time, timeout, lost: fail

``execute`` calls :meth:`TaskLife.start`, ``execute_complete`` :meth:`TaskLife.resume`; each returns the step the
operator carries out: :class:`Defer` (hand the wait to the triggerer) or :class:`Done` (return the record). Every
Describe is parsed once into a :class:`~airflow_sm_prefs.sagemaker.job_view.JobView`, which is what flows from here on.
A deferred wait has one event, held until Airflow has taken the deferral's exit (``wait/deferral_hold.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

import pendulum
from airflow.providers.common.compat.sdk import AirflowException

from airflow_sm_prefs.preflight.runner import Prepared
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker import job_status
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.job_view import JobView, to_time
from airflow_sm_prefs.task import attempts
from airflow_sm_prefs.task.deadlines import default_deadline, wait_deadlines
from airflow_sm_prefs.task.submission import Submission
from airflow_sm_prefs.task.task_failures import NoCapacityError, no_capacity_message, wait_timeout_message
from airflow_sm_prefs.task.task_outcome import TaskOutcome, latest_view
from airflow_sm_prefs.wait import deferral_hold
from airflow_sm_prefs.wait.polling import WaitFor, WaitOutcome
from airflow_sm_prefs.wait.wait_event import WaitEnded

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from airflow_sm_prefs.facts.record import JobRecord
    from airflow_sm_prefs.preflight.certification import Certification
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.wait.log_follower import LogCursor

# The trigger enforces the wait's deadline itself; Airflow's own timeout on the deferral only backs it up.
DEFER_TIMEOUT_MARGIN = timedelta(minutes=15)


@dataclass(frozen=True)
class Waiting:
    """How the task waits for its job: the operator's arguments, judged (built by the operator,
    ``surface.operators.waiting_of``)."""

    deferrable: bool
    check_interval: float
    max_pending: int | None
    wait_timeout: int | None
    stop_on_kill: bool
    stop_on_timeout: bool
    resubmit_after_failure: bool
    stream_logs: bool
    retries: int
    # The Variables the task's templates read, (key, read as JSON), and the connections: the trigger masks them.
    mask_variables: tuple[tuple[str, bool], ...] = ()
    mask_connections: tuple[str, ...] = ()


class Defer(NamedTuple):
    trigger: BaseTrigger
    timeout: timedelta


class Done(NamedTuple):
    record: JobRecord
    view: JobView


Step = Defer | Done


class Wait(NamedTuple):
    """A wait in progress: what has been announced, and when it must end."""

    announced: bool
    deadline: datetime
    pending_deadline: datetime | None
    pending_bound: str  # the pending deadline in the failure's words (``pending_bound``)


def pending_bound(claim: attempts.JobClaim | None, pending_deadline: datetime | None) -> str:
    """The bound a job waited for capacity within, in a failure's words: ``finish_by`` when its moment (the
    claim's ``pending_until``; the task's pending deadline is the earlier of it and ``max_pending``'s) is the
    pending deadline, else ``max_pending``. Judged from what this job was given, not the operator as it reads now."""
    finish_by_moment = to_time(claim.pending_until) if claim is not None else None
    if finish_by_moment is not None and finish_by_moment == pending_deadline:
        return "in time to finish by finish_by"
    return "within max_pending"


class TaskLife:
    """One execution of the task: its first start, or its resumption after a deferral."""

    def __init__(
        self,
        kind: JobKind,
        hook: SageMakerPreferenceHook,
        *,
        connection: Connection,
        region: str | None,
        waiting: Waiting,
        certification: Certification,
        context: Context,
        log: Any,
        persist_links: Callable[[str], None],
    ) -> None:
        self.kind = kind
        self.hook = hook
        self.connection = connection
        self.region = region
        self.waiting = waiting
        self.certification = certification
        self.context = context
        self.log = log
        self.persist_links = persist_links
        self.active_job: str | None = None  # what a kill stops
        # Where this try's reading of the job's log starts (a reattached try starts from now); a try's XComs
        # start empty, so it is known here and never pulled (a missing XCom is an error line in Airflow's log).
        self.log_cursor: LogCursor | None = None
        # Read before anything is created: a setting that cannot be used fails the task with no job launched.
        self.hold_seconds = deferral_hold.configured_seconds() if waiting.deferrable else 0.0
        self.claims = attempts.ClaimStore.from_context(context)

    @cached_property
    def outcome(self) -> TaskOutcome:
        return TaskOutcome(
            self.context,
            self.kind,
            self.region,
            self.log,
            self.claims,
            self.certification,
            connection=self.connection.in_region(self.region),
        )

    def start(
        self, request: dict[str, Any], job_name: str | None, preflight: Callable[[dict[str, Any]], Prepared]
    ) -> Step:
        """Claim the task instance's job, create it (past ``preflight``) or reattach to it, and follow it."""
        submission = Submission(
            hook=self.hook,
            kind=self.kind,
            connection=self.connection.in_region(self.region),
            stop_on_kill=self.waiting.stop_on_kill,
            resubmit_after_failure=self.waiting.resubmit_after_failure,
            retries=self.waiting.retries,
            log=self.log,
            claims=self.claims,
        )
        submitted = submission.submit(self.context, request, job_name=job_name, outcome=self.outcome, prepare=preflight)
        return self._follow(submitted.claim, submitted.request, reattached=submitted.reattached)

    def resume(self, ended: WaitEnded, rendered_request: Callable[[], Mapping[str, Any]]) -> Step:
        """Go on from the trigger's event."""
        claim = self.claims.load()
        this_try = int(getattr(self.context["ti"], "try_number", 0) or 0)
        if claim is not None and this_try and claim.try_number > this_try:
            # A resume of an earlier try, run after Airflow failed that try and started the next (the deferral
            # race): the job and its claim are the later try's now, and this one touches neither.
            raise AirflowException(
                f"try {this_try} resumed after try {claim.try_number} took over SageMaker job {claim.job_name}; "
                "leaving the job and its record to that try"
            )
        if claim is not None and claim.job_name != ended.job_name:
            # Airflow delivered another trigger's event (seen with SQLite, which reuses a deleted trigger's
            # id): the job it reports is not the one this task instance follows now, so keep following ours.
            self.log.warning(
                "Ignoring an event about SageMaker job %s: this task instance follows job %s",
                ended.job_name,
                claim.job_name,
            )
            return self._follow(claim, rendered_request())
        if claim is not None:
            self.claims.save(claim.advanced(attempts.RESUMED))
        self.active_job = ended.job_name
        view = ended.view(self.kind)
        if view is None:  # a trigger that saw no change since the deferral (a quiet queue) sends no description
            view = latest_view(self.hook, JobView.parse(self.kind, {self.kind.name_field: ended.job_name}), self.log)
        # The event's text read once, as times; an event that names no deadline waits as a fresh job would.
        pending_deadline = to_time(ended.pending_deadline)
        deadline = to_time(ended.deadline) or default_deadline(self.kind)
        wait = Wait(ended.announced, deadline, pending_deadline, pending_bound(claim, pending_deadline))
        return self._after(ended.outcome, view, wait, ended.message)

    def _follow(self, claim: attempts.JobClaim, request: Mapping[str, Any], reattached: bool = False) -> Step:
        """Wait for the claimed job: finish at once if it ended, announce a selection, then wait."""
        self.active_job = claim.job_name
        self.persist_links(claim.job_name)
        description, service_now = self.hook.describe_job_at(self.kind, claim.job_name)
        view = JobView.parse(self.kind, description)
        if self.waiting.stream_logs and reattached and view.started is not None and not view.terminal:
            from airflow_sm_prefs.wait.worker_logs import start_from_now

            self.log_cursor = start_from_now(self.context["ti"], claim.job_name, service_now, self.log)
        deadlines = wait_deadlines(
            self.kind,
            request,
            submitted_at=claim.submitted_at,
            max_pending=self.waiting.max_pending,
            wait_timeout=self.waiting.wait_timeout,
            pending_until=claim.pending_until,
        )
        if view.terminal:
            return self._finish(view, announced=False)
        announced = view.selected is not None
        if announced:
            self.outcome.announce(view)
        self.claims.save(claim.advanced(attempts.DEFERRED if self.waiting.deferrable else attempts.BLOCKING))
        return self._wait(view, Wait(announced, *deadlines, pending_bound(claim, deadlines.pending_deadline)))

    def _wait(self, view: JobView, wait: Wait) -> Step:
        """Wait for the job's end: in the triggerer, which announces the selection itself, or in this slot,
        which waits for the selection first (unless announced) and announces it."""
        log_cursor = self.log_cursor
        if self.waiting.deferrable:
            return self._deferral(view, wait, log_cursor)
        from airflow_sm_prefs.wait import blocking

        wait_for: WaitFor = "completion" if wait.announced else "selection"

        observed = None
        if self.waiting.stream_logs:
            from airflow_sm_prefs.wait.worker_logs import blocking_reader

            assert view.name is not None
            observed = blocking_reader(self.connection, self.kind, view.name, log=self.log, saved=log_cursor)
        outcome, view = blocking.wait(
            self.hook,
            view,
            wait_for=wait_for,
            deadline=wait.deadline,
            pending_deadline=wait.pending_deadline,
            check_interval=self.waiting.check_interval,
            log=self.log,
            observed=observed,
        )
        return self._after(outcome, view, wait)

    def _deferral(self, view: JobView, wait: Wait, log_cursor: LogCursor | None) -> Defer:
        from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger
        from airflow_sm_prefs.wait.watcher import KnownState

        assert view.name is not None
        if self.waiting.stream_logs and log_cursor is None:
            from airflow_sm_prefs.wait.worker_logs import start_at_the_beginning

            # The trigger reads the cursor back from XCom (a triggerer restart resumes where it stood): it is
            # there from the start, so no read of it ever misses.
            log_cursor = start_at_the_beginning(self.context["ti"])
        now = pendulum.now("UTC")
        trigger = SageMakerPreferenceJobTrigger(
            job_name=view.name,
            job_kind=self.kind.name,
            hook_kwargs=self.connection.hook_arguments(),
            wait_for="completion",
            deadline=wait.deadline.isoformat(),  # the trigger's serialized form: text
            pending_deadline=wait.pending_deadline.isoformat() if wait.pending_deadline else None,
            poll_interval=self.waiting.check_interval,
            stop_on_kill=self.waiting.stop_on_kill,
            known_state=KnownState.of(view).to_json(),
            stream_logs=self.waiting.stream_logs,
            log_cursor=log_cursor,
            mask_variables=[list(read) for read in self.waiting.mask_variables],
            mask_connections=list(self.waiting.mask_connections),
            deferred_at=now.isoformat(),
            hold_seconds=self.hold_seconds,
            announce_selection=not wait.announced,
            region=self.region,
        )
        self.log.info(
            "Deferring: the job's end resumes the task, %s",
            f"no sooner than {self.hold_seconds:.0f} s from now ([sm_prefs] deferral_hold_seconds: Airflow must "
            "first take this try's exit)"
            if self.hold_seconds > 0
            else "as soon as it comes ([sm_prefs] deferral_hold_seconds = 0)",
        )
        remaining = wait.deadline - now
        # A plain timedelta: the Task SDK's msgpack channel cannot encode pendulum's Duration.
        return Defer(trigger, timedelta(seconds=remaining.total_seconds()) + DEFER_TIMEOUT_MARGIN)

    def _after(self, outcome: WaitOutcome, view: JobView, wait: Wait, message: str | None = None) -> Step:
        """What the task does once a wait ended, whichever way it waited."""
        if outcome is WaitOutcome.SELECTED:
            self.outcome.announce(view)
            claim = self.claims.load()
            if claim is not None:
                self.claims.save(claim.advanced(attempts.DEFERRED if self.waiting.deferrable else attempts.BLOCKING))
            return self._wait(view, wait._replace(announced=True))
        if outcome is WaitOutcome.FINISHED:
            return self._finish(view, wait.announced)
        stop = self.waiting.stop_on_timeout
        if outcome is WaitOutcome.PENDING_TIMEOUT:
            why = no_capacity_message(view, wait.pending_bound)
            self.outcome.abandon(self.hook, view, error=NoCapacityError, message=why, stop=stop, left="queued")
        if outcome is WaitOutcome.TIMEOUT:
            self.outcome.abandon(
                self.hook, view, error=AirflowException, message=wait_timeout_message(view), stop=stop, left="running"
            )
        raise RuntimeError(f"lost track of SageMaker job {view.name}: {message}; a retry reattaches")

    def _finish(self, view: JobView, announced: bool) -> Done:
        tail: list[str] = []
        failed_after_start = job_status.failed(view.status) and view.started is not None
        if self.waiting.stream_logs and failed_after_start and view.name is not None:
            from airflow_sm_prefs.wait.worker_logs import last_lines, logs_client

            tail = last_lines(logs_client(self.connection), self.kind, view.name, self.log)
        return Done(self.outcome.finish(view, announced, tail), view)
