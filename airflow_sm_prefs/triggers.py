"""The deferrable wait: one trigger per task, all of a process's triggers served by a shared watcher."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pendulum
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_sm_prefs import progress
from airflow_sm_prefs.jobs import KINDS, TERMINAL_STATUSES, JobKind
from airflow_sm_prefs.watcher import JobWatcher, KnownState, signature

STOP_TIMEOUT_SECONDS = 20.0


class SageMakerPreferenceJobTrigger(BaseTrigger):
    """Waits for a SageMaker job to select a preference (``wait_for="selection"``) or to end.

    Yields exactly one event, ``{"status": ..., "job_name": ..., "description": ...}`` where status is
    ``selected``, ``finished`` (a terminal status), ``pending_timeout`` (no capacity by ``pending_deadline``),
    ``timeout`` (``deadline`` reached) or ``error`` (the job can no longer be observed).
    """

    def __init__(
        self,
        job_name: str,
        job_kind: str,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        wait_for: str = "completion",
        deadline: str | None = None,
        pending_deadline: str | None = None,
        poll_interval: float = 60.0,
        stop_on_kill: bool = True,
        known_state: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if job_kind not in KINDS:
            raise ValueError(f"job_kind must be one of {sorted(KINDS)}, got {job_kind!r}")
        if wait_for not in ("selection", "completion"):
            raise ValueError(f"wait_for must be 'selection' or 'completion', got {wait_for!r}")
        self.job_name = job_name
        self.job_kind = job_kind
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.wait_for = wait_for
        self.deadline = deadline
        self.pending_deadline = pending_deadline
        self.poll_interval = poll_interval
        self.stop_on_kill = stop_on_kill
        self.known_state = known_state

    @property
    def kind(self) -> JobKind:
        return KINDS[self.job_kind]

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job_name": self.job_name,
                "job_kind": self.job_kind,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
                "wait_for": self.wait_for,
                "deadline": self.deadline,
                "pending_deadline": self.pending_deadline,
                "poll_interval": self.poll_interval,
                "stop_on_kill": self.stop_on_kill,
                "known_state": self.known_state,
            },
        )

    def _event(self, status: str, description: dict[str, Any] | None, message: str | None = None) -> TriggerEvent:
        # What the operator needs to resume travels in the event itself: `airflow dags test` hands the resume
        # method only the event, not the kwargs given to defer().
        return TriggerEvent(
            {
                "status": status,
                "job_name": self.job_name,
                "job_kind": self.job_kind,
                "description": description,
                "message": message,
                "announced": self.wait_for == "completion",
                "deadline": self.deadline,
                "pending_deadline": self.pending_deadline,
            }
        )

    def _next_limit(self, selected: bool) -> tuple[float | None, str]:
        now = pendulum.now("UTC")
        limits: list[tuple[float, str]] = []
        if self.deadline:
            limits.append(((pendulum.parse(self.deadline) - now).total_seconds(), "timeout"))  # type: ignore[operator]
        if self.pending_deadline and not selected:
            limits.append(
                (
                    (pendulum.parse(self.pending_deadline) - now).total_seconds(),  # type: ignore[operator]
                    "pending_timeout",
                )
            )
        if not limits:
            return None, "timeout"
        seconds, why = min(limits)
        return max(0.0, seconds), why

    async def run(self) -> AsyncIterator[TriggerEvent]:
        kind = self.kind
        watcher = JobWatcher.shared(kind, self.aws_conn_id, self.region_name)
        known = KnownState.from_json(self.known_state) if self.known_state else None
        last_signature = known.signature if known else None
        description: dict[str, Any] | None = None
        async with watcher.watch(self.job_name, self.poll_interval, known) as updates:
            while True:
                selected = description is not None and kind.selected(description) is not None
                timeout, why = self._next_limit(selected)
                try:
                    update = await asyncio.wait_for(updates.get(), timeout=timeout)
                except TimeoutError:
                    yield self._event(why, description)
                    return
                if update.error is not None:
                    yield self._event("error", description, update.error)
                    return
                description = update.description
                assert description is not None
                current = signature(kind, description)
                if current != last_signature:
                    self.log.info(progress.status_line(kind, description))
                    last_signature = current
                if description.get(kind.status_field) in TERMINAL_STATUSES:
                    yield self._event("finished", description)
                    return
                if self.wait_for == "selection" and kind.selected(description) is not None:
                    self.log.info(progress.selection_line(kind, description))
                    yield self._event("selected", description)
                    return

    async def on_kill(self) -> None:
        """The user marked the deferred task failed/success or cleared it: stop the job (best effort)."""
        if not self.stop_on_kill:
            self.log.info("stop_on_kill is off: leaving SageMaker job %s running", self.job_name)
            return
        await stop_job(self.kind, self.job_name, self.aws_conn_id, self.region_name, self.log)


async def stop_job(kind: JobKind, job_name: str, aws_conn_id: str | None, region_name: str | None, log: Any) -> None:
    from airflow_sm_prefs.hooks import SageMakerPreferenceHook, already_ended

    hook = SageMakerPreferenceHook(aws_conn_id=aws_conn_id, region_name=region_name)
    try:
        async with await hook.get_async_conn() as client:
            await asyncio.wait_for(
                getattr(client, kind.stop_method)(**{kind.name_field: job_name}), timeout=STOP_TIMEOUT_SECONDS
            )
        log.info("Requested stop of SageMaker %s job %s", kind.name, job_name)
    except Exception as error:
        if already_ended(error):
            log.info("SageMaker %s job %s had already ended; nothing to stop", kind.name, job_name)
        else:
            log.warning("Could not stop SageMaker %s job %s: %s", kind.name, job_name, error)
