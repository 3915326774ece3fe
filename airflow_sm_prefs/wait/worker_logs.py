"""Reading a job's CloudWatch log from the worker: its last lines for a failure message, and its new lines
while a blocking wait (``deferrable=False``) runs. The deferred wait reads through ``log_follower`` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.wait.log_follower import (
    DRAIN_SECONDS,
    NOT_YET,
    LogCursor,
    LogLine,
    PagePosition,
    unread_lines_note,
)

if TYPE_CHECKING:
    from airflow_sm_prefs.sagemaker.job_view import JobView

TAIL_LINES = 20
# A failure's reason is nearly always in the first instances' streams; a large cluster is not read whole.
TAIL_STREAMS = 8


def logs_client(connection: Connection) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(client_type="logs", **connection.hook_arguments()).conn


def last_lines(client: Any, kind: JobKind, job_name: str, log: Any, *, count: int = TAIL_LINES) -> list[str]:
    """The job's last ``count`` lines over its first streams, oldest first; none (and a log line) if unreadable."""
    from airflow_sm_prefs.sagemaker.hooks import error_code

    try:
        streams = client.describe_log_streams(
            logGroupName=kind.log_group, logStreamNamePrefix=f"{job_name}/", limit=TAIL_STREAMS
        )["logStreams"]
        events: list[tuple[int, str, str]] = []
        for stream in streams:
            name = stream["logStreamName"]
            page = client.get_log_events(
                logGroupName=kind.log_group, logStreamName=name, startFromHead=False, limit=count
            )
            events.extend((e["timestamp"], name, str(e["message"])) for e in page["events"])
    except Exception as error:
        if error_code(error) not in NOT_YET:
            log.warning("Could not read the log of SageMaker job %s for the failure message: %s", job_name, error)
        return []
    # By time alone: the sort is stable, so lines of one millisecond keep the job's own order (stream by stream,
    # each as written), not the order of their text.
    events.sort(key=lambda event: event[0])
    return [
        LogLine.of({"logStreamName": stream, "message": message, "timestamp": timestamp}).render()
        for timestamp, stream, message in events[-count:]
    ]


class BlockingLogReader:
    """A blocking wait's log reading: each call shows the lines written since the last, for at most
    ``DRAIN_SECONDS``; a listing cut there goes on at the next call, from the page it stopped at."""

    def __init__(
        self, client: Any, kind: JobKind, job_name: str, *, log: logging.Logger | Any, cursor: LogCursor
    ) -> None:
        self.client = client
        self.kind = kind
        self.job_name = job_name
        self.log = log
        self.cursor = cursor
        self.unavailable = False
        self._position = PagePosition()

    def read(self, last: bool = False) -> None:
        """Show the new lines; ``last``: the job has ended, so lines left unread are said to be in CloudWatch."""
        from airflow_sm_prefs.sagemaker.hooks import ErrorClass, classify, error_code

        stop_at = time.monotonic() + DRAIN_SECONDS
        while not self.unavailable:
            listing, request = self._position.next_request(self.kind.log_group, self.job_name, self.cursor)
            try:
                page = self.client.filter_log_events(**request)
            except Exception as error:
                self._position.refused(error)
                if error_code(error) in NOT_YET or classify(error) in (ErrorClass.THROTTLED, ErrorClass.TRANSIENT):
                    return
                self.unavailable = True
                self.log.warning(
                    "Cannot read the log of SageMaker job %s (%s); its lines will not appear here. Grant "
                    "logs:FilterLogEvents on %s to see them.",
                    self.job_name,
                    error_code(error) or type(error).__name__,
                    self.kind.log_group,
                )
                return
            fresh, more = self._position.turned(listing, page)
            self.cursor = listing.cursor
            for event in fresh:
                self.log.info(LogLine.of(event).render())
            if not more:
                return
            if time.monotonic() >= stop_at:
                if last:
                    self.log.warning(unread_lines_note(self.job_name, self.kind.log_group, DRAIN_SECONDS))
                return


def start_at_the_beginning(ti: Any) -> LogCursor:
    """This try reads the job's log from its first line: the cursor saved where the trigger reads it."""
    from airflow_sm_prefs.wait.log_stream import CURSOR_XCOM_KEY

    cursor = LogCursor()
    ti.xcom_push(key=CURSOR_XCOM_KEY, value=cursor.to_json())
    return cursor


def start_from_now(ti: Any, job_name: str, service_now: float | None, log: Any) -> LogCursor:
    """A retry reattached to a running job: the lines an earlier try showed are in that try's log, so this try
    shows the lines written from now on (in the service's clock), none of them twice."""
    import pendulum

    from airflow_sm_prefs.wait.log_stream import CURSOR_XCOM_KEY

    now = service_now if service_now is not None else pendulum.now("UTC").timestamp()
    cursor = LogCursor(after=int(now) * 1000)
    ti.xcom_push(key=CURSOR_XCOM_KEY, value=cursor.to_json())
    log.info(
        "SageMaker job %s was already running: its log lines up to %s are in the earlier tries' logs and in "
        "CloudWatch; showing the lines written from then on",
        job_name,
        pendulum.from_timestamp(int(now)).to_iso8601_string(),
    )
    return cursor


def blocking_reader(
    connection: Connection, kind: JobKind, job_name: str, *, log: Any, saved: LogCursor | None
) -> Callable[[JobView], None]:
    """What a blocking wait calls with each view: show the job's new lines once it runs."""
    reader = BlockingLogReader(logs_client(connection), kind, job_name, log=log, cursor=saved or LogCursor())

    def observed(view: JobView) -> None:
        if view.started is not None:
            reader.read(last=view.terminal)

    return observed
