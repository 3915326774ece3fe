"""Following jobs' CloudWatch logs from the triggerer, shared like the status watching.

One follower per event loop, connection and log group reads the lines of every running job its triggers
follow: each job's interval (the task's ``check_interval``) it asks ``FilterLogEvents`` once for the job
(its streams share the prefix ``<job name>/``), at most ``MAX_CALLS_PER_ROUND`` calls a round, the job read
longest ago first, through a rate
limiter shared per account and Region that halves on ``ThrottlingException``. A queued job has no streams,
so it is not asked about at all: a thousand queued jobs cost no calls. Without ``logs:`` permissions the
follower says so once and stops reading; the jobs are watched as before.

A :class:`LogCursor` says where a job's reading stands (the last event time read, and the ids of the events
read at that time), so a reader that starts again from a cursor shows no line twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from airflow_sm_prefs.platform.printable import printable
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.hooks import ErrorClass, classify, error_code
from airflow_sm_prefs.wait.loop_shared import ClientFactory, LoopShared
from airflow_sm_prefs.wait.polling import backoff_seconds
from airflow_sm_prefs.wait.ratelimit import AdaptiveRateLimiter

log = logging.getLogger(__name__)

MAX_CALLS_PER_ROUND = 25
EVENTS_PER_CALL = 1000
IDLE_LINGER_SECONDS = 30.0
# CloudWatch Logs' read APIs have their own per-account quotas, separate from SageMaker's.
LOGS_CALLS_PER_SECOND = 5.0
NOT_YET = ("ResourceNotFoundException",)  # no group or stream yet: the job has not logged
MAX_LINE_CHARS = 8192  # CloudWatch takes 1 MB events; a task log line that long helps nobody
MAX_STREAM_CHARS = 512
# A job's last lines are read at its end, page after page (a page a call, within the calls' rate), for at most
# this long: the task's end waits on it. What is left is in CloudWatch, and the task log says where.
DRAIN_SECONDS = 120.0


@dataclass(frozen=True)
class LogLine:
    stream: str
    message: str
    timestamp: int  # ms

    def render(self) -> str:
        from airflow_sm_prefs.platform.redaction import redacted

        return redacted(f"[{self.stream}] {self.message}")

    @classmethod
    def of(cls, event: dict[str, Any]) -> LogLine:
        """A ``FilterLogEvents`` event, made safe to print: what a job writes is untrusted."""
        return cls(
            printable(str(event.get("logStreamName", "")), MAX_STREAM_CHARS),
            printable(str(event.get("message", "")).rstrip("\n"), MAX_LINE_CHARS),
            event["timestamp"],
        )


def events_in_order(page: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``FilterLogEvents`` page's events by time, then stream: the order they are shown in. The sort is
    stable, so the events of one stream at one millisecond keep the listing's order, the order they were
    written in, which the cursor counts by."""
    return sorted(page.get("events", []), key=lambda e: (e["timestamp"], e.get("logStreamName", "")))


@dataclass(frozen=True)
class LogCursor:
    """Every event before ``after`` (ms) has been read, and of those at ``after``, the first ``read_at_after``
    of each stream, in the listing's order. Counts, not event ids: the cursor is saved to XCom with every
    batch, and a job that writes 30,000 lines in one millisecond would otherwise carry 30,000 ids each time."""

    after: int = 0
    read_at_after: tuple[tuple[str, int], ...] = ()

    def read_of(self, stream: str) -> int:
        return dict(self.read_at_after).get(stream, 0)

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "read_at_after": dict(self.read_at_after)}

    @classmethod
    def from_json(cls, raw: Any) -> LogCursor | None:
        """The saved cursor; a cursor saved by an earlier release (event ids under ``seen``) restarts at its
        millisecond, which can show that millisecond's lines again but never loses one."""
        if not isinstance(raw, dict) or not isinstance(raw.get("after"), int):
            return None
        counts = raw.get("read_at_after")
        if not isinstance(counts, dict):
            return cls(raw["after"])
        return cls(
            raw["after"],
            tuple(sorted((str(stream), n) for stream, n in counts.items() if isinstance(n, int) and n > 0)),
        )


class LogListing:
    """One ``FilterLogEvents`` listing from a cursor's time, read page after page in its order: which events
    are new, and the cursor after them. A listing that starts again from a cursor passes over, in each stream,
    as many events at the cursor's millisecond as the cursor says were read."""

    def __init__(self, start: LogCursor) -> None:
        self.start = start
        self.cursor = start
        self._time = start.after
        self._passed: dict[str, int] = {}  # events of each stream at ``_time`` this listing went through

    def page(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The page's events not read before (``events`` in order, as ``events_in_order`` gives them)."""
        fresh = []
        for event in events:
            timestamp, stream = event["timestamp"], str(event.get("logStreamName", ""))
            if timestamp < self._time:
                continue  # before the cursor: a listing from startTime holds none, a fake or a clock skew might
            if timestamp > self._time:
                self._time, self._passed = timestamp, {}
            self._passed[stream] = self._passed.get(stream, 0) + 1
            read_before = self.start.read_of(stream) if timestamp == self.start.after else 0
            if self._passed[stream] > read_before:
                fresh.append(event)
        if fresh:
            counts = dict(self.start.read_at_after) if self._time == self.start.after else {}
            for stream, passed in self._passed.items():
                counts[stream] = max(counts.get(stream, 0), passed)
            self.cursor = LogCursor(self._time, tuple(sorted(counts.items())))
        return fresh


@dataclass
class PagePosition:
    """Where one reader of one job's log stands between two pages: the listing under way and its next page's
    token (neither between listings). The blocking reader and the follower share it; they differ only in how
    they call ``FilterLogEvents`` and where the fresh lines go."""

    listing: LogListing | None = None
    token: str | None = None

    def next_request(self, log_group: str, job_name: str, cursor: LogCursor) -> tuple[LogListing, dict[str, Any]]:
        """The listing the next page belongs to (a new one from ``cursor`` between listings), and its request."""
        listing = self.listing or LogListing(cursor)
        return listing, listing_request(log_group, job_name, listing, self.token)

    def turned(self, listing: LogListing, page: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The page's events not read before, and whether the listing has more pages."""
        fresh = listing.page(events_in_order(page))
        token = page.get("nextToken")
        self.listing, self.token = (listing, token) if token else (None, None)
        return fresh, bool(token)

    def refused(self, error: BaseException) -> None:
        if self.token and error_code(error) == "InvalidParameterException":
            # An expired token: list again from the cursor, which passes over what was shown.
            self.listing, self.token = None, None


@dataclass(frozen=True)
class LogBatch:
    """New lines for one job and the cursor after them; or, with ``unavailable``, why none will come."""

    lines: tuple[LogLine, ...] = ()
    cursor: LogCursor | None = None
    unavailable: str | None = None
    left_unread: str | None = None  # the end's reading stopped at its bound: where the rest of the lines are


@dataclass
class _Followed:
    job_name: str
    cursor: LogCursor
    interval: float
    running: bool = False
    queues: list[asyncio.Queue[LogBatch]] = field(default_factory=list)
    last_read: float = 0.0
    next_due: float = 0.0
    failures: int = 0
    # Mid-way through a listing: it, and its next page's token. Without them, a millisecond at which more
    # lines were written than one page holds would be read from its start for ever.
    position: PagePosition = field(default_factory=PagePosition)
    # The end's reading (``drain``) and the follower's round may ask for one job at once: each listing starts
    # from the cursor the other one may be moving, so one page at a time, or both show the same lines.
    reading: asyncio.Lock = field(default_factory=asyncio.Lock)


class LogFollower(LoopShared):
    task_name = "sm-prefs-log-follower"

    def __init__(
        self, key: tuple[Any, ...], log_group: str, client_factory: ClientFactory, limiter: AdaptiveRateLimiter
    ):
        super().__init__(key, client_factory, limiter)
        self.log_group = log_group
        self._jobs: dict[str, _Followed] = {}
        self.unavailable: str | None = None
        self.calls = 0

    @classmethod
    def shared(cls, log_group: str, connection: Connection, client_factory: ClientFactory | None = None) -> LogFollower:
        key = (connection.key, log_group)

        def make() -> LogFollower:
            limiter = AdaptiveRateLimiter.shared((*connection.rate_scope, "logs"), rate=LOGS_CALLS_PER_SECOND)
            return cls(key, log_group, client_factory or _logs_client_factory(connection), limiter)

        return cls._shared_instance(key, make)

    @contextlib.asynccontextmanager
    async def follow(self, job_name: str, cursor: LogCursor, interval: float) -> AsyncIterator[asyncio.Queue[LogBatch]]:
        """New lines of ``job_name`` after ``cursor``, read every ``interval`` seconds once the job is marked
        running (``set_running``)."""
        queue: asyncio.Queue[LogBatch] = asyncio.Queue()
        job = self._jobs.get(job_name)
        if job is None:
            job = self._jobs[job_name] = _Followed(job_name, cursor, interval)
        job.interval = min(job.interval, interval)
        job.queues.append(queue)
        if self.unavailable is not None:
            queue.put_nowait(LogBatch(unavailable=self.unavailable))
        try:
            yield queue
        finally:
            job.queues.remove(queue)
            if not job.queues:
                self._jobs.pop(job_name, None)

    def set_running(self, job_name: str, running: bool) -> None:
        """Whether the job's instances run (and so may log); a queued job costs no calls."""
        job = self._jobs.get(job_name)
        if job is not None and job.running != running:
            job.running = running
            job.next_due = 0.0
            if running:
                self._ensure_running()
                self._wake.set()

    async def drain(self, job_name: str) -> None:
        """Read the job's last lines now (its end was seen): whatever it wrote before it ended is shown."""
        job = self._jobs.get(job_name)
        if job is None or self.unavailable is not None:
            return
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + DRAIN_SECONDS
        async with await self._client_factory() as client:
            while await self._read(client, job):
                if loop.time() >= stop_at:
                    left = LogBatch(left_unread=unread_lines_note(job.job_name, self.log_group, DRAIN_SECONDS))
                    for queue in job.queues:
                        queue.put_nowait(left)
                    return

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client_factory())
                idle_since: float | None = None
                while self.unavailable is None:
                    now = loop.time()
                    running = [job for job in self._jobs.values() if job.running]
                    if not running:
                        idle_since = idle_since or now
                        if now - idle_since >= IDLE_LINGER_SECONDS:
                            break
                    else:
                        idle_since = None
                    due = sorted((job for job in running if job.next_due <= now), key=lambda job: job.last_read)
                    for job in due[:MAX_CALLS_PER_ROUND]:
                        await self._read(client, job)
                    upcoming = min((job.next_due for job in running), default=now + IDLE_LINGER_SECONDS)
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=max(0.05, upcoming - loop.time()))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # no client could be built: the jobs are watched as before, without lines
            self._give_up(f"cannot read CloudWatch Logs ({type(error).__name__}: {error})")

    async def _read(self, client: Any, job: _Followed) -> bool:
        """One page of the job's new lines, delivered; True when a full page suggests more are waiting."""
        async with job.reading:
            return await self._read_page(client, job)

    async def _read_page(self, client: Any, job: _Followed) -> bool:
        await self._limiter.acquire()
        self.calls += 1
        job.last_read = asyncio.get_running_loop().time()
        listing, request = job.position.next_request(self.log_group, job.job_name, job.cursor)
        try:
            page = await client.filter_log_events(**request)
        except Exception as error:
            job.position.refused(error)
            self._failed(job, error)
            return False
        self._limiter.succeeded()
        job.failures = 0
        fresh, more = job.position.turned(listing, page)
        if fresh:
            job.cursor = listing.cursor
            lines = tuple(LogLine.of(e) for e in fresh)
            for queue in job.queues:
                queue.put_nowait(LogBatch(lines, listing.cursor))
        job.next_due = asyncio.get_running_loop().time() + (0.0 if more else job.interval)
        return more

    def _failed(self, job: _Followed, error: BaseException) -> None:
        kind = classify(error)
        loop = asyncio.get_running_loop()
        if error_code(error) in NOT_YET:  # no group or stream yet: nothing logged so far
            job.next_due = loop.time() + job.interval
            return
        if kind is ErrorClass.THROTTLED or kind is ErrorClass.TRANSIENT:
            if kind is ErrorClass.THROTTLED:
                self._limiter.throttled()
            job.failures += 1
            job.next_due = loop.time() + backoff_seconds(job.interval, job.failures)
            return
        code = error_code(error) or type(error).__name__
        if kind is ErrorClass.ACCESS_DENIED:
            self._give_up(
                f"cannot read CloudWatch Logs ({code}); the job's log lines will not appear here. Grant "
                f"logs:FilterLogEvents on {self.log_group} to see them."
            )
        else:
            self._give_up(f"cannot read CloudWatch Logs ({code}: {error}); the job's log lines will not appear here.")

    def _give_up(self, why: str) -> None:
        """Stop reading for every job of this follower, and tell each trigger once why."""
        self.unavailable = why
        log.warning("SageMaker log streaming stopped for %s: %s", self.log_group, why)
        for followed in self._jobs.values():
            for queue in followed.queues:
                queue.put_nowait(LogBatch(unavailable=why))


def listing_request(log_group: str, job_name: str, listing: LogListing, token: str | None) -> dict[str, Any]:
    """A ``FilterLogEvents`` page of the job's streams (they share the prefix ``<job name>/``)."""
    request: dict[str, Any] = {
        "logGroupName": log_group,
        "logStreamNamePrefix": f"{job_name}/",
        "startTime": listing.start.after,
        "limit": EVENTS_PER_CALL,
    }
    if token:
        request["nextToken"] = token
    return request


def unread_lines_note(job_name: str, log_group: str, seconds: float) -> str:
    return (
        f"SageMaker job {job_name} wrote more lines than {seconds:.0f} s of reading shows; the rest are in "
        f"CloudWatch Logs, group {log_group}, streams {job_name}/*"
    )


def _logs_client_factory(connection: Connection) -> ClientFactory:
    async def factory() -> Any:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        from airflow_sm_prefs.sagemaker.hooks import async_client

        return await async_client(AwsBaseHook(client_type="logs", **connection.hook_arguments()))

    return factory
