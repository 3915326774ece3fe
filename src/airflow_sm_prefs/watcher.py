"""One watcher per triggerer event loop and (connection, region, job kind), shared by every trigger.

Triggers register the job they wait for and receive updates; they never poll on their own clock. The
watcher holds one client, spends calls through a rate limiter shared per account and Region, backs off on
throttling and 5xx, and re-checks each job on an adaptive interval: soon when a change is imminent
(provisioning, uploading, stopping), rarely while a job queues for capacity. Only changes are published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_sm_prefs.jobs import TERMINAL_STATUSES, JobKind
from airflow_sm_prefs.ratelimit import AdaptiveRateLimiter
from airflow_sm_prefs.record import jsonable

log = logging.getLogger(__name__)

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "SlowDown",
    }
)
TRANSIENT_CODES = frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
    }
)
IMMINENT_STATES = frozenset({"Starting", "Downloading", "Uploading", "Stopping", "Restarting"})
MAX_BACKOFF_SECONDS = 300.0
IDLE_LINGER_SECONDS = 30.0
ClientFactory = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class JobUpdate:
    """What a trigger receives: a fresh Describe response, or why the job can no longer be observed."""

    description: dict[str, Any] | None = None
    error: str | None = None


def signature(kind: JobKind, description: dict[str, Any]) -> tuple[Any, ...]:
    """What counts as a change worth publishing (and logging once)."""
    return (description.get(kind.status_field), description.get("SecondaryStatus"), kind.selected(description))


def is_transient(error: BaseException) -> tuple[bool, bool]:
    """(transient, throttled) for an exception raised by a botocore/aiobotocore call."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        throttled = code in THROTTLING_CODES
        return throttled or code in TRANSIENT_CODES or status >= 500, throttled
    if isinstance(error, ConnectionError | HTTPClientError | asyncio.TimeoutError | OSError):
        return True, False
    return False, False


@dataclass
class _Watched:
    name: str
    interval: float
    queues: list[asyncio.Queue[JobUpdate]] = field(default_factory=list)
    next_due: float = 0.0
    last: JobUpdate | None = None
    last_signature: tuple[Any, ...] | None = None
    failures: int = 0


class JobWatcher:
    _instances: ClassVar[dict[tuple[Any, ...], JobWatcher]] = {}

    def __init__(
        self, key: tuple[Any, ...], kind: JobKind, client_factory: ClientFactory, limiter: AdaptiveRateLimiter
    ) -> None:
        self.key = key
        self.kind = kind
        self._client_factory = client_factory
        self._limiter = limiter
        self._jobs: dict[str, _Watched] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.calls = 0

    @classmethod
    def shared(
        cls,
        kind: JobKind,
        aws_conn_id: str | None,
        region_name: str | None,
        client_factory: ClientFactory | None = None,
    ) -> JobWatcher:
        loop = asyncio.get_running_loop()
        key = (id(loop), aws_conn_id, region_name, kind.name)
        watcher = cls._instances.get(key)
        if watcher is None or watcher._loop_closed():
            limiter = AdaptiveRateLimiter.shared((id(loop), aws_conn_id, region_name))
            factory = client_factory or _hook_client_factory(aws_conn_id, region_name)
            watcher = cls._instances[key] = cls(key, kind, factory, limiter)
        return watcher

    @classmethod
    async def close_all(cls) -> None:
        """Stop this event loop's watchers (tests; a triggerer simply exits)."""
        loop_id = id(asyncio.get_running_loop())
        for key, watcher in list(cls._instances.items()):
            if key[0] == loop_id and watcher._task is not None:
                watcher._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher._task
            cls._instances.pop(key, None)

    def _loop_closed(self) -> bool:
        return self._task is not None and self._task.get_loop().is_closed()

    @contextlib.asynccontextmanager
    async def watch(self, job_name: str, poll_interval: float) -> AsyncIterator[asyncio.Queue[JobUpdate]]:
        """Subscribe to a job's updates for the duration of the ``async with`` block."""
        queue: asyncio.Queue[JobUpdate] = asyncio.Queue()
        job = self._jobs.get(job_name)
        if job is None:
            job = self._jobs[job_name] = _Watched(job_name, poll_interval)
        job.interval = min(job.interval, poll_interval)
        job.queues.append(queue)
        if job.last is not None:
            queue.put_nowait(job.last)
        job.next_due = 0.0  # a new subscriber deserves a fresh look now
        self._ensure_running()
        self._wake.set()
        try:
            yield queue
        finally:
            job.queues.remove(queue)
            if not job.queues:
                self._jobs.pop(job_name, None)

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"sm-prefs-watcher-{self.key[1:]}")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client_factory())
                idle_since: float | None = None
                while True:
                    now = loop.time()
                    if not self._jobs:
                        idle_since = idle_since or now
                        if now - idle_since >= IDLE_LINGER_SECONDS:
                            break
                    else:
                        idle_since = None
                    due = [job for job in self._jobs.values() if job.next_due <= now]
                    if due:
                        await asyncio.gather(*(self._poll(client, job) for job in due))
                        continue
                    next_due = min((job.next_due for job in self._jobs.values()), default=now + IDLE_LINGER_SECONDS)
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, next_due - now))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client could not be built: tell every waiting trigger
            log.exception("SageMaker watcher %s failed", self.key[1:])
            for job in list(self._jobs.values()):
                self._publish(job, JobUpdate(error=f"could not reach SageMaker: {exc}"))
        finally:
            if JobWatcher._instances.get(self.key) is self and not self._jobs:
                JobWatcher._instances.pop(self.key, None)

    async def _poll(self, client: Any, job: _Watched) -> None:
        loop = asyncio.get_running_loop()
        await self._limiter.acquire()
        if job.name not in self._jobs:
            return
        self.calls += 1
        try:
            response = await getattr(client, self.kind.describe_method)(**{self.kind.name_field: job.name})
        except Exception as exc:
            transient, throttled = is_transient(exc)
            if throttled:
                self._limiter.throttled()
            if transient:
                job.failures += 1
                delay = min(MAX_BACKOFF_SECONDS, job.interval * 2 ** min(job.failures, 8) / 4)
                job.next_due = loop.time() + delay * random.uniform(0.8, 1.2)
                log.info(
                    "SageMaker %s for %s: transient error (%s); retrying in %.0fs",
                    self.kind.describe_method,
                    job.name,
                    exc,
                    delay,
                )
                return
            job.next_due = loop.time() + job.interval
            self._publish(job, JobUpdate(error=f"{type(exc).__name__}: {exc}"))
            return
        self._limiter.succeeded()
        job.failures = 0
        description = jsonable(response)
        current = signature(self.kind, description)
        if current != job.last_signature:
            job.last_signature = current
            self._publish(job, JobUpdate(description=description))
        else:
            job.last = JobUpdate(description=description)
        job.next_due = loop.time() + self._interval_for(job, description) * random.uniform(0.9, 1.1)

    def _interval_for(self, job: _Watched, description: dict[str, Any]) -> float:
        status = description.get(self.kind.status_field)
        secondary = description.get("SecondaryStatus")
        if status in TERMINAL_STATUSES:
            return job.interval * 4
        if status == "Stopping" or secondary in IMMINENT_STATES:
            return max(1.0, job.interval / 4)
        if self.kind.selected(description) is None:  # queued for capacity: it may take hours
            return min(MAX_BACKOFF_SECONDS, job.interval * 2)
        return job.interval

    def _publish(self, job: _Watched, update: JobUpdate) -> None:
        job.last = update
        for queue in job.queues:
            queue.put_nowait(update)


def _hook_client_factory(aws_conn_id: str | None, region_name: str | None) -> ClientFactory:
    async def factory() -> Any:
        from airflow_sm_prefs.hooks import SageMakerPreferenceHook

        return await SageMakerPreferenceHook(aws_conn_id=aws_conn_id, region_name=region_name).get_async_conn()

    return factory
