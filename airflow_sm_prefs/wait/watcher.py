"""One watcher per triggerer event loop and (connection, region, job kind), shared by every trigger.

Triggers register the job they wait for and receive updates; they never poll on their own clock. Each
interval the watcher asks SageMaker once which jobs changed (``List*Jobs`` with ``LastModifiedTimeAfter``,
paginated) and describes only those, so the calls per interval do not grow with the number of waiting jobs.
The safety net scales with pages too: every half hour a sweep lists every job modified since the oldest
change the watcher knows of and describes only the watched jobs whose summary differs from what it holds
(or that the sweep did not find), where a Describe per job per half hour would need 5.6 calls/s for 10,000
jobs. If listing is denied or misbehaves the watcher falls back to describing each job on its own interval
(and says so once in the log). One client per watcher, a
rate limiter shared per account and Region, backoff on throttling and 5xx, and an adaptive interval: short
when a change is imminent (provisioning, uploading, stopping), long while everything queues for capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.hooks import (
    ErrorClass,
    SageMakerPreferenceHook,
    async_client,
    classify,
    is_transient,
    service_time,
    shared_hook,
)
from airflow_sm_prefs.sagemaker.job_view import JobView, jsonable
from airflow_sm_prefs.wait.loop_shared import ClientFactory, LoopShared
from airflow_sm_prefs.wait.polling import backoff_seconds, interval_for
from airflow_sm_prefs.wait.ratelimit import AdaptiveRateLimiter

log = logging.getLogger(__name__)

IDLE_LINGER_SECONDS = 30.0
SAFETY_NET_SECONDS = 1800.0  # a sweep of every watched job this often, whatever incremental listing says
LIST_OVERLAP_SECONDS = 10.0  # re-list this much service time: timestamps travel in whole seconds
LIST_PAGE_SIZE = 100


@dataclass(frozen=True)
class JobUpdate:
    """What a trigger receives: a fresh Describe response, or why the job can no longer be observed."""

    description: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class KnownState:
    """What the operator last saw of a job; lets a new or moved trigger start without a Describe."""

    status: str | None
    secondary: str | None
    selected: tuple[str, int] | None
    last_modified: float | None

    @classmethod
    def of(cls, view: JobView) -> KnownState:
        modified = view.last_modified
        return cls(view.status, view.secondary_status, view.selected, modified.timestamp() if modified else None)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> KnownState:
        selected = raw.get("selected")
        return cls(
            raw.get("status"),
            raw.get("secondary"),
            (selected[0], int(selected[1])) if selected else None,
            raw.get("last_modified"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "secondary": self.secondary,
            "selected": list(self.selected) if self.selected else None,
            "last_modified": self.last_modified,
        }

    @property
    def signature(self) -> tuple[Any, ...]:
        return (self.status, self.secondary, self.selected)


@dataclass
class _Watched:
    name: str
    interval: float
    queues: list[asyncio.Queue[JobUpdate]] = field(default_factory=list)
    next_due: float = 0.0
    last: JobUpdate | None = None
    last_signature: tuple[Any, ...] | None = None
    summary_key: tuple[Any, ...] | None = None
    state_interval: float = 0.0
    failures: int = 0


class JobWatcher(LoopShared):
    task_name = "sm-prefs-watcher"

    def __init__(
        self, key: tuple[Any, ...], kind: JobKind, client_factory: ClientFactory, limiter: AdaptiveRateLimiter
    ) -> None:
        super().__init__(key, client_factory, limiter)
        self.kind = kind
        self._jobs: dict[str, _Watched] = {}
        self._listing = True
        self._cursor: float | None = None  # service time after which changes are not yet seen
        self._next_list = 0.0
        self._next_sweep: float | None = None
        self._list_failures = 0
        self.calls = 0
        self.list_calls = 0
        self.list_rounds = 0
        self.sweep_calls = 0

    @classmethod
    def shared(
        cls,
        kind: JobKind,
        connection: Connection,
        client_factory: ClientFactory | None = None,
    ) -> JobWatcher:
        """The event loop's watcher for this connection and job kind."""
        key = (connection.key, kind.name)

        def make() -> JobWatcher:
            limiter = AdaptiveRateLimiter.shared(connection.rate_scope)
            return cls(key, kind, client_factory or _hook_client_factory(connection), limiter)

        return cls._shared_instance(key, make)

    @contextlib.asynccontextmanager
    async def watch(
        self, job_name: str, poll_interval: float, known: KnownState | None = None
    ) -> AsyncIterator[asyncio.Queue[JobUpdate]]:
        """Subscribe to a job's updates for the duration of the ``async with`` block.

        With ``known`` (what the operator last saw) no Describe is needed to start: listing from the known
        modification time reports anything that changed since, even after a triggerer restart.
        """
        queue: asyncio.Queue[JobUpdate] = asyncio.Queue()
        job = self._jobs.get(job_name)
        if job is None:
            job = self._jobs[job_name] = _Watched(job_name, poll_interval)
        job.interval = min(job.interval, poll_interval)
        job.queues.append(queue)
        if job.last is not None:
            queue.put_nowait(job.last)
        if known is not None and known.last_modified is not None and job.summary_key is None:
            self._seed(job, known)
        else:
            job.next_due = 0.0  # nothing known: take a fresh look now
        self._ensure_running()
        self._wake.set()
        try:
            yield queue
        finally:
            job.queues.remove(queue)
            if not job.queues:
                self._jobs.pop(job_name, None)

    def _seed(self, job: _Watched, known: KnownState) -> None:
        assert known.last_modified is not None
        job.summary_key = (known.status, known.secondary, known.last_modified)
        job.last_signature = known.signature
        job.state_interval = interval_for(job.interval, known.status, known.secondary, known.selected is not None)
        if self._cursor is None or known.last_modified < self._cursor:
            self._cursor = known.last_modified
        now = asyncio.get_running_loop().time()
        self._schedule(job, known.selected, now)
        self._next_list = min(self._next_list or float("inf"), now + job.interval)

    def _schedule(self, job: _Watched, selected: Any, now: float) -> None:
        """When the job is next described on its own: after its state's interval on its own clock; never on
        the listing's clock, where the incremental listing and the sweep find its changes."""
        # A selection that changes nothing a summary shows keeps the job on its own clock until then.
        own_clock = not self._listing or (not self.kind.summary_shows_selection and selected is None)
        if own_clock:
            job.next_due = now + job.state_interval * random.uniform(0.9, 1.1)
            return
        job.next_due = float("inf")
        if self._next_sweep is None:
            self._next_sweep = _sweep_time(now)

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
                    due = {job.name: job for job in self._jobs.values() if job.next_due <= now}
                    if self._listing_active and now >= self._next_list:
                        for name in await self._list_changes(client):
                            if name in self._jobs:
                                due[name] = self._jobs[name]
                        self._next_list = loop.time() + self._list_interval()
                    if self._listing_active and self._next_sweep is not None and now >= self._next_sweep:
                        for name in await self._sweep(client):
                            due[name] = self._jobs[name]
                        self._next_sweep = _sweep_time(loop.time())
                    if due:
                        await asyncio.gather(*(self._poll(client, job) for job in due.values()))
                        continue
                    next_due = min((job.next_due for job in self._jobs.values()), default=now + IDLE_LINGER_SECONDS)
                    if self._listing_active:
                        next_due = min(next_due, self._next_list, self._next_sweep or float("inf"))
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, next_due - now))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client could not be built: tell every waiting trigger
            log.exception("SageMaker %s watcher failed", self.kind.name)
            for job in list(self._jobs.values()):
                self._publish(job, JobUpdate(error=f"could not reach SageMaker: {exc}"))
        finally:
            if not self._jobs:
                self._unregister()

    @property
    def _listing_active(self) -> bool:
        """Listing is allowed, there is something to watch, and a cursor to list from."""
        return self._listing and bool(self._jobs) and self._cursor is not None

    async def _poll(self, client: Any, job: _Watched) -> None:
        loop = asyncio.get_running_loop()
        await self._limiter.acquire()
        if job.name not in self._jobs:
            return
        self.calls += 1
        try:
            response = await SageMakerPreferenceHook.describe_job_async(client, self.kind, job.name)
        except Exception as exc:
            if self._transient(exc):
                job.failures += 1
                delay = backoff_seconds(job.interval, job.failures)
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
        job.summary_key = self._summary_key(response)
        modified = job.summary_key[2]
        # A Describe shows the job as of now, so it never needs to rewind the cursor (that would make every
        # listing re-read old jobs); it only starts one.
        if self._cursor is None and modified is not None:
            self._cursor = modified
        description = jsonable(response)
        view = JobView.parse(self.kind, description)
        if view.signature != job.last_signature:
            job.last_signature = view.signature
            self._publish(job, JobUpdate(description=description))
        else:
            job.last = JobUpdate(description=description)
        job.state_interval = interval_for(job.interval, view.status, view.secondary_status, view.selected is not None)
        self._schedule(job, view.selected, loop.time())

    def _transient(self, error: BaseException) -> bool:
        """Whether to retry after ``error``; a throttling answer also slows the shared rate limiter."""
        if classify(error) is ErrorClass.THROTTLED:
            self._limiter.throttled()
        return is_transient(error)

    def _list_interval(self) -> float:
        jobs = list(self._jobs.values())
        if not jobs:
            return IDLE_LINGER_SECONDS
        intervals = [job.state_interval or job.interval for job in jobs]
        return max(1.0, min(intervals)) * random.uniform(0.9, 1.1)

    async def _pages(self, client: Any, after: dt.datetime) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """(number, page) of every job modified after ``after``: one rate-limited call per page."""
        token: str | None = None
        number = 0
        while True:
            await self._limiter.acquire()
            self.calls += 1
            request: dict[str, Any] = {"LastModifiedTimeAfter": after, "MaxResults": LIST_PAGE_SIZE}
            if token:
                request["NextToken"] = token
            page = await SageMakerPreferenceHook.list_jobs_async(client, self.kind, **request)
            yield number, page
            token = page.get("NextToken")
            if not token:
                return
            number += 1

    async def _list_changes(self, client: Any) -> list[str]:
        """Names of watched jobs whose summary changed since the cursor (one call per page, usually one)."""
        assert self._cursor is not None
        after = dt.datetime.fromtimestamp(self._cursor - LIST_OVERLAP_SECONDS, tz=dt.UTC)
        newest = self._cursor
        changed: list[str] = []
        self.list_rounds += 1
        try:
            async for number, page in self._pages(client, after):
                self.list_calls += 1
                if number == 0:
                    # Everything modified before the service answered the first page is in this listing, so
                    # the next one can start from the service's clock: a quiet account then lists nothing.
                    served_at = service_time(page)
                    if served_at is not None:
                        newest = max(newest, served_at)
                for summary in page.get(self.kind.summaries_field, []):
                    key = self._summary_key(summary)
                    if key[2] is not None:
                        newest = max(newest, key[2])
                    job = self._jobs.get(summary.get(self.kind.name_field, ""))
                    if job is not None and key != job.summary_key:
                        changed.append(job.name)
        except Exception as exc:
            if self._transient(exc):
                self._list_failures += 1
                self._next_list = asyncio.get_running_loop().time() + backoff_seconds(4.0, self._list_failures)
                return []
            log.warning(
                "SageMaker %s failed (%s); watching each %s job with its own Describe from now on. Grant "
                "sagemaker:%s to cut API calls.",
                self.kind.list_method,
                exc,
                self.kind.name,
                "".join(part.title() for part in self.kind.list_method.split("_")),
            )
            self._listing = False
            for job in self._jobs.values():
                job.next_due = 0.0
            return []
        self._list_failures = 0
        self._limiter.succeeded()
        self._cursor = newest
        return changed

    async def _sweep(self, client: Any) -> list[str]:
        """The safety net: watched jobs on the listing's clock whose summary, listed afresh, differs from what
        the watcher holds, or that the listing did not return. One call per page of jobs, not per job."""
        watched = {name: job for name, job in self._jobs.items() if job.next_due == float("inf")}
        if not watched:
            return []
        known = [job.summary_key[2] for job in watched.values() if job.summary_key and job.summary_key[2]]
        if len(known) < len(watched):
            return [name for name, job in watched.items() if not (job.summary_key and job.summary_key[2])]
        after = dt.datetime.fromtimestamp(min(known) - LIST_OVERLAP_SECONDS, tz=dt.UTC)
        seen: set[str] = set()
        differs: list[str] = []
        try:
            async for _, page in self._pages(client, after):
                self.sweep_calls += 1
                for summary in page.get(self.kind.summaries_field, []):
                    name = summary.get(self.kind.name_field, "")
                    job = watched.get(name)
                    if job is None:
                        continue
                    seen.add(name)
                    if self._summary_key(summary) != job.summary_key:
                        differs.append(name)
        except Exception as exc:  # the sweep is a net: on any failure, look at every watched job instead
            self._transient(exc)
            log.info("SageMaker %s sweep failed (%s); describing the watched jobs", self.kind.name, exc)
            return list(watched)
        self._limiter.succeeded()
        return differs + [name for name in watched if name not in seen]

    def _summary_key(self, fields: Mapping[str, Any]) -> tuple[Any, Any, float | None]:
        """What a listing's summary and a Describe both show of a job: status, secondary status, last change."""
        return (
            fields.get(self.kind.status_field),
            fields.get("SecondaryStatus"),
            _timestamp(fields.get("LastModifiedTime")),
        )

    def _publish(self, job: _Watched, update: JobUpdate) -> None:
        job.last = update
        for queue in job.queues:
            queue.put_nowait(update)


def _timestamp(value: Any) -> float | None:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


def _hook_client_factory(connection: Connection) -> ClientFactory:
    async def factory() -> Any:
        return await async_client(shared_hook(connection))

    return factory


def _sweep_time(now: float) -> float:
    """When the next sweep is due, spread so that many triggerers' sweeps do not coincide."""
    return now + SAFETY_NET_SECONDS * random.uniform(0.9, 1.1)
