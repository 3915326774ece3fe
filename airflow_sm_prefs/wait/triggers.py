"""The deferrable wait: one trigger per task, all of a process's triggers served by a shared watcher."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pendulum
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_sm_prefs.platform import airflow_lines, supervisor_calls
from airflow_sm_prefs.request.jobs import KINDS, JobKind
from airflow_sm_prefs.sagemaker import status_lines
from airflow_sm_prefs.sagemaker.connection import Connection

if TYPE_CHECKING:
    from airflow_sm_prefs.wait.log_follower import LogCursor
from airflow_sm_prefs.sagemaker.job_view import JobView, to_time
from airflow_sm_prefs.wait import deferral_hold
from airflow_sm_prefs.wait.announcement import announce_from_trigger
from airflow_sm_prefs.wait.polling import WaitFor, WaitOutcome, next_limit, observe
from airflow_sm_prefs.wait.wait_event import WaitEnded

# What a wait ended with, kept until the hold is over: the outcome and its message.
_Ready = tuple[WaitOutcome, str | None]

# What a user's action leaves a deferred task in: marked failed, success or skipped, its run marked failed
# (removed, upstream_failed), or cleared ("none", until the scheduler picks it up again). In any other state
# the task still owns its job: a retry reattaches to it, a resumed try goes on watching it, and a clear that
# the scheduler already moved on is met by the next try, which stops the old job before it starts a new one.
USER_ENDED_STATES = frozenset({"failed", "success", "skipped", "removed", "upstream_failed", "none"})


class SageMakerPreferenceJobTrigger(BaseTrigger):
    """Waits for a SageMaker job to select a preference (``wait_for="selection"``) or to end.

    Yields exactly one event, a :class:`~airflow_sm_prefs.wait.wait_event.WaitEnded`'s payload, whose description
    holds only the Describe fields the operator reads (never the job's environment or hyperparameters, which
    may hold secrets).

    :param hook_kwargs: the task's :class:`~airflow_sm_prefs.sagemaker.connection.Connection` as the hook's
        arguments (``aws_conn_id``, ``region_name``, ``verify``, ``config``), the form every version serialized,
        so the trigger's clients are built exactly like the task's. ``aws_conn_id`` and ``region_name`` alone
        are accepted for triggers serialized by 0.1.0.
    :param stream_logs: show the job's CloudWatch log lines in the task log while it runs.
    :param log_cursor: where this try's log reading starts (a :class:`~airflow_sm_prefs.wait.log_follower.LogCursor`
        as JSON; default: the job's first line). The reading's progress is kept in the XCom
        ``sm_prefs_log_cursor`` and read back by a trigger that starts again in the same try (a triggerer
        restart, a move to another triggerer), so no line is shown twice.
    :param mask_variables: the Variables the task's templates read, as ``[key, read as JSON]`` (names, never
        values), read again here so the triggerer masks in the job's log lines and events what the worker masks.
    :param mask_connections: the ids of the connections the task's templates read, read again here for the same
        reason.
    :param deferred_at: when the task deferred (ISO 8601).
    :param hold_seconds: no event sooner than this many seconds after ``deferred_at`` (``[sm_prefs]
        deferral_hold_seconds``), so that Airflow has taken the deferring try's exit before the event resumes the
        task (:mod:`~airflow_sm_prefs.wait.deferral_hold`). The trigger keeps watching meanwhile and sends the
        job's latest state.
    :param announce_selection: push the XCom ``selection`` (and its metrics) here when SageMaker selects a
        preference, and go on waiting for the job's end, instead of resuming the task to do it.
    :param region: the job's Region, for the announced selection.
    """

    def __init__(  # keyword arguments only: Airflow builds a trigger again from ``serialize()``'s dict
        self,
        *,
        job_name: str,
        job_kind: str,
        hook_kwargs: dict[str, Any] | None = None,
        wait_for: WaitFor = "completion",
        deadline: str | None = None,
        pending_deadline: str | None = None,
        poll_interval: float = 60.0,
        stop_on_kill: bool = True,
        known_state: dict[str, Any] | None = None,
        aws_conn_id: str | None = None,
        region_name: str | None = None,
        stream_logs: bool = False,
        log_cursor: LogCursor | dict[str, Any] | None = None,
        mask_variables: list[list[Any]] | None = None,
        mask_connections: list[str] | None = None,
        deferred_at: str | None = None,
        hold_seconds: float = 0.0,
        announce_selection: bool = False,
        region: str | None = None,
    ) -> None:
        super().__init__()
        if job_kind not in KINDS:
            raise ValueError(f"job_kind must be one of {sorted(KINDS)}, got {job_kind!r}")
        if wait_for not in ("selection", "completion"):
            raise ValueError(f"wait_for must be 'selection' or 'completion', got {wait_for!r}")
        self.job_name = job_name
        self.job_kind = job_kind
        if hook_kwargs is None:  # a trigger serialized by 0.1.0, still waiting across an upgrade
            hook_kwargs = {"aws_conn_id": aws_conn_id or "aws_default", "region_name": region_name}
        # Serialized as the hook's arguments, the form every version wrote: a trigger deferred before an upgrade
        # is built again from it.
        self.connection = Connection.of_hook_arguments(hook_kwargs)
        self.wait_for = wait_for
        self.deadline = deadline
        self.pending_deadline = pending_deadline
        self._limits = (to_time(deadline), to_time(pending_deadline))  # read once, as times
        self.poll_interval = poll_interval
        self.stop_on_kill = stop_on_kill
        self.known_state = known_state
        self.stream_logs = stream_logs
        self.log_cursor = _log_cursor(log_cursor)  # a dict only as ``serialize()`` wrote it
        self.mask_variables = [[str(key), bool(as_json)] for key, as_json in mask_variables or []]
        self.mask_connections = [str(conn_id) for conn_id in mask_connections or []]
        self.deferred_at = deferred_at
        self.hold_seconds = float(hold_seconds)
        self.hold_until = deferral_hold.hold_until(deferred_at, self.hold_seconds)
        self.announce_selection = announce_selection
        self.region = region

    @property
    def kind(self) -> JobKind:
        return KINDS[self.job_kind]

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "job_kind": self.job_kind,
                "hook_kwargs": self.connection.hook_arguments(),
                "wait_for": self.wait_for,
                "deadline": self.deadline,
                "pending_deadline": self.pending_deadline,
                "poll_interval": self.poll_interval,
                "stop_on_kill": self.stop_on_kill,
                "known_state": self.known_state,
                "stream_logs": self.stream_logs,
                "log_cursor": None if self.log_cursor is None else self.log_cursor.to_json(),
                "mask_variables": self.mask_variables,
                "mask_connections": self.mask_connections,
                "deferred_at": self.deferred_at,
                "hold_seconds": self.hold_seconds,
                "announce_selection": self.announce_selection,
                "region": self.region,
            },
        )

    def _event(self, ready: _Ready, description: dict[str, Any] | None, announced: bool) -> TriggerEvent:
        # What the operator needs to resume travels in the event itself: `airflow dags test` hands the resume
        # method only the event, not the kwargs given to defer().
        status, message = ready
        ended = WaitEnded(
            outcome=status,
            job_name=self.job_name,
            description=self.kind.essentials(description) if description else None,
            announced=announced,
            deadline=self.deadline,
            pending_deadline=self.pending_deadline,
            message=message,
            deferred_at=self.deferred_at,
        )
        if self.deferred_at:
            waited = deferral_hold.seconds_since(self.deferred_at, pendulum.now("UTC"))
            self.log.info("Resuming the task (%s) %.1f s after it deferred", status, waited)
        return TriggerEvent(ended.payload(self.kind))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            async for event in self._watch():
                yield event
        except asyncio.CancelledError:
            if not airflow_lines.triggerer_calls_on_kill():  # 3.3 calls on_kill for this instead
                await self._stop_if_a_user_ended_the_task()
            raise

    async def _watch(self) -> AsyncIterator[TriggerEvent]:
        from airflow_sm_prefs.platform.redaction import mask_connections, mask_variables
        from airflow_sm_prefs.wait.watcher import JobWatcher, KnownState

        await mask_variables([(str(key), bool(as_json)) for key, as_json in self.mask_variables])
        await mask_connections(self.mask_connections)

        kind = self.kind
        watcher = JobWatcher.shared(kind, self.connection)
        known = KnownState.from_json(self.known_state) if self.known_state else None
        last_signature = known.signature if known else None
        description: dict[str, Any] | None = None
        selected = False
        # The selection was announced before the deferral (waiting for completion, with nothing to announce here),
        # or by this trigger.
        announced = self.wait_for == "completion" and not self.announce_selection
        selection_seen = False
        # How the wait ended, kept until the hold is over; a later observation replaces it, and the event carries
        # the latest description.
        ready: _Ready | None = None
        async with watcher.watch(self.job_name, self.poll_interval, known) as updates, self._log_lines() as lines:
            waiting_for_update: asyncio.Future[Any] | None = asyncio.ensure_future(updates.get())
            waiting_for_lines = asyncio.ensure_future(lines.next_batch()) if lines else None
            try:
                while True:
                    now = pendulum.now("UTC")
                    held_for = deferral_hold.seconds_left(self.hold_until, now)
                    if ready is not None and held_for <= 0:
                        yield self._event(ready, description, announced)
                        return
                    timeout, limit = next_limit(now, *self._limits, selected)
                    if ready is not None:
                        timeout = held_for
                    pending = {waiting for waiting in (waiting_for_update, waiting_for_lines) if waiting is not None}
                    if not pending:  # the job ended and its lines are shown: only the hold is left
                        await asyncio.sleep(held_for)
                        continue
                    done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                    if not done:
                        if ready is None:
                            ready = (limit, None)
                            self._say_if_held(limit)
                        continue
                    if lines is not None and waiting_for_lines is not None and waiting_for_lines in done:
                        await lines.show(waiting_for_lines.result())
                        waiting_for_lines = asyncio.ensure_future(lines.next_batch())
                    if waiting_for_update is None or waiting_for_update not in done:
                        continue
                    update = waiting_for_update.result()
                    waiting_for_update = asyncio.ensure_future(updates.get())
                    if update.error is not None:
                        if ready is None:  # a held observation stands: the task describes the job again
                            ready = (WaitOutcome.ERROR, update.error)
                            self._say_if_held(WaitOutcome.ERROR)
                        continue
                    description = update.description
                    assert description is not None
                    view = JobView.parse(kind, description)
                    selected = view.selected is not None
                    if ready is not None and _void_by_news(ready[0], selected):
                        ready = None
                    if lines is not None:
                        lines.running(view.started is not None)
                    if view.signature != last_signature:
                        self.log.info(status_lines.status_line(view))
                        last_signature = view.signature
                    outcome = observe(view, self.wait_for)
                    if selected and not selection_seen and (outcome is WaitOutcome.SELECTED or not announced):
                        selection_seen = True
                        self.log.info(status_lines.selection_line(view))
                        if self.announce_selection:
                            ti = getattr(self, "task_instance", None)
                            announced = await announce_from_trigger(view, self.region, ti)
                    if outcome is None:
                        continue
                    if lines is not None and waiting_for_lines is not None and view.terminal:
                        # A batch already taken from the queue is shown first; a pending get is cancelled,
                        # which leaves its batch in the queue for finish() to show.
                        if waiting_for_lines.done():
                            await lines.show(waiting_for_lines.result())
                        waiting_for_lines.cancel()
                        waiting_for_lines = None
                        await lines.finish()
                    if view.terminal:  # nothing more will change: stop asking SageMaker while the hold runs out
                        waiting_for_update.cancel()
                        waiting_for_update = None
                    ready = (outcome, None)
                    self._say_if_held(outcome)
            finally:
                for waiting in (waiting_for_update, waiting_for_lines):
                    if waiting is not None:
                        waiting.cancel()

    def _say_if_held(self, outcome: WaitOutcome) -> None:
        held_for = deferral_hold.seconds_left(self.hold_until, pendulum.now("UTC"))
        if held_for > 0:
            self.log.info(
                "The wait ended (%s); resuming the task in %.0f s, once Airflow has taken the deferral's exit "
                "([sm_prefs] deferral_hold_seconds)",
                outcome,
                held_for,
            )

    @contextlib.asynccontextmanager
    async def _log_lines(self) -> AsyncIterator[Any]:
        """The job's log lines for this trigger, or None when ``stream_logs`` is off."""
        if not self.stream_logs:
            yield None
            return
        from airflow_sm_prefs.wait.cloudwatch_task_log import try_stream
        from airflow_sm_prefs.wait.log_follower import LogCursor, LogFollower
        from airflow_sm_prefs.wait.log_stream import TriggerLogStream

        follower = LogFollower.shared(self.kind.log_group, self.connection)
        stream = TriggerLogStream(
            self.job_name,
            follower,
            task_log=self.log,
            task_instance=self.task_instance,
            try_stream=try_stream(self.task_instance),
        )
        cursor = await stream.saved_cursor() or self.log_cursor or LogCursor()
        async with follower.follow(self.job_name, cursor, self.poll_interval) as queue:
            stream.queue = queue
            yield stream

    async def on_kill(self) -> None:
        """Airflow 3.3 calls this when the trigger leaves its triggerer: stop the job if a user ended the task.

        A user's mark failed / success or clear is one reason. The other is a triggerer that missed its
        heartbeats: another triggerer took the trigger over and may already have fired its event, so the task
        can be deferred, scheduled, queued or running again, and its job must go on."""
        await self._stop_if_a_user_ended_the_task()

    async def _stop_if_a_user_ended_the_task(self) -> None:
        """Stop the job only when the task's state is one a user's action leaves (see ``USER_ENDED_STATES``).

        Before Airflow 3.3 a trigger gets no ``on_kill``: it is cancelled, both when a user acts and when its
        triggerer stops or hands it over, so the same rule applies. When the state cannot be read, the job goes
        on: a restart must never stop healthy jobs, and the listener stops the job of a task a user ended."""
        from airflow_sm_prefs.sagemaker.hooks import shared_hook

        if not self.stop_on_kill:
            self.log.info("stop_on_kill is off: leaving SageMaker job %s running", self.job_name)
            return
        state = await self._task_state()
        if state not in USER_ENDED_STATES:
            self.log.info(
                "SageMaker job %s keeps running: its task is %s (no user ended it)",
                self.job_name,
                state or "of unknown state",
            )
            return
        self.log.info("A user ended the task (its state: %s): stopping SageMaker job %s", state, self.job_name)
        await shared_hook(self.connection).stop_job_async(self.kind, self.job_name, self.log)

    async def _task_state(self) -> str | None:
        """The task instance's state as the Execution API says; None when it cannot say."""
        ti = getattr(self, "task_instance", None)
        if ti is None:
            return None
        map_index = getattr(ti, "map_index", -1)
        query = {"dag_id": ti.dag_id, "task_ids": [ti.task_id], "run_ids": [ti.run_id], "map_index": map_index}
        try:
            states = await _task_states(query)
        except Exception as error:  # no Execution API here (a test, a triggerer without it)
            self.log.debug("Could not read the task's state (%s)", error)
            return None
        key = ti.task_id if map_index is None or map_index < 0 else f"{ti.task_id}_{map_index}"
        in_run = states.get(ti.run_id, {})
        if key not in in_run:
            return None
        return str(in_run[key] or "none")  # a cleared task has no state


def _void_by_news(held: WaitOutcome, selected: bool) -> bool:
    """A held end that a later observation voids: an error (SageMaker answers again) or the pending bound (the
    job was selected since, so the bound no longer applies)."""
    return held is WaitOutcome.ERROR or (held is WaitOutcome.PENDING_TIMEOUT and selected)


async def _task_states(query: dict[str, Any]) -> dict[str, Any]:
    """``RuntimeTaskInstance.get_task_states`` from a trigger."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    return dict(await supervisor_calls.ask(RuntimeTaskInstance.get_task_states, **query))


def _log_cursor(given: Any) -> LogCursor | None:
    from airflow_sm_prefs.wait.log_follower import LogCursor

    return given if isinstance(given, LogCursor) else LogCursor.from_json(given)
