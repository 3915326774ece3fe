"""A trigger's view of its job's log: lines into the task log, progress kept so none is shown twice.

The reading's progress (a :class:`~airflow_sm_prefs.wait.log_follower.LogCursor`) is written to the task
instance's XCom ``sm_prefs_log_cursor`` before the lines it covers are logged: a trigger that starts again
in the same try (a triggerer restart, a move to another triggerer) reads it back and goes on from there, so
a crash between the two can skip lines but never repeat them. A new try starts with no XCom (Airflow clears
them); the operator then hands the trigger a cursor of its own (see ``operators``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from airflow_sm_prefs.platform import supervisor_calls
from airflow_sm_prefs.wait.announcement import xcom_scope
from airflow_sm_prefs.wait.cloudwatch_task_log import TryStream
from airflow_sm_prefs.wait.log_follower import LogBatch, LogCursor, LogFollower

CURSOR_XCOM_KEY = "sm_prefs_log_cursor"
log = logging.getLogger(__name__)


class TriggerLogStream:
    def __init__(
        self,
        job_name: str,
        follower: LogFollower,
        *,
        task_log: Any,
        task_instance: Any,
        try_stream: TryStream | None = None,
    ) -> None:
        self.job_name = job_name
        self.follower = follower
        self.task_log = task_log
        self.task_instance = task_instance
        # Task logs in CloudWatch: the lines go to the try's own stream (see cloudwatch_task_log).
        self.try_stream = try_stream
        self.queue: asyncio.Queue[LogBatch] | None = None
        self._told_unavailable = False
        self._told_put_failed = False  # said once: a missing permission would repeat it every batch

    async def next_batch(self) -> LogBatch:
        assert self.queue is not None
        return await self.queue.get()

    def running(self, started: bool) -> None:
        self.follower.set_running(self.job_name, started)

    async def show(self, batch: LogBatch) -> None:
        if batch.unavailable is not None:
            if not self._told_unavailable:
                self._told_unavailable = True
                await self._write([f"SageMaker job {self.job_name}: {batch.unavailable}"], "warning")
            return
        if batch.left_unread is not None:
            await self._write([batch.left_unread], "warning")
            return
        if batch.cursor is not None:
            await self._save(batch.cursor)
        if batch.lines:
            await self._write([line.render() for line in batch.lines], "info")

    async def _write(self, lines: list[str], level: str) -> None:
        if self.try_stream is not None:
            try:
                await self.try_stream.put(lines, level)
                return
            except Exception as error:  # CloudWatch unreachable: the trigger's own log still has them
                if not self._told_put_failed:
                    self._told_put_failed = True
                    self.task_log.warning("could not put the job's lines in the task's CloudWatch stream: %s", error)
        for line in lines:
            getattr(self.task_log, level)(line)

    async def finish(self) -> None:
        """The job ended: read and show what it wrote last."""
        await self.follower.drain(self.job_name)
        assert self.queue is not None
        while not self.queue.empty():
            await self.show(self.queue.get_nowait())

    # -- the cursor in XCom ---------------------------------------------------------------------------------
    # Read and written through supervisor_calls: a cancelled trigger never cuts a request in half.

    def _scope(self) -> dict[str, Any] | None:
        return xcom_scope(self.task_instance)

    async def saved_cursor(self) -> LogCursor | None:
        scope = self._scope()
        if scope is None:
            return None
        try:
            from airflow.sdk.execution_time.xcom import XCom

            saved = await supervisor_calls.ask(XCom.get_one, key=CURSOR_XCOM_KEY, **scope)
            return LogCursor.from_json(saved)
        except Exception as error:  # no comms to the API server here: start from the operator's cursor
            log.debug("could not read the log cursor of %s: %s", self.job_name, error)
            return None

    async def _save(self, cursor: LogCursor) -> None:
        scope = self._scope()
        if scope is None:
            return
        try:
            from airflow.sdk.execution_time.xcom import XCom

            await supervisor_calls.ask(XCom.set, CURSOR_XCOM_KEY, cursor.to_json(), **scope)
        except Exception as error:
            log.debug("could not save the log cursor of %s: %s", self.job_name, error)
