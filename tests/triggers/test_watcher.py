"""The shared watcher at scale and under restarts: calls per interval, fallbacks, several event loops."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Callable

import pytest

from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.wait import watcher as watcher_module
from airflow_sm_prefs.wait.triggers import SageMakerPreferenceJobTrigger
from airflow_sm_prefs.wait.watcher import JobWatcher, KnownState
from sm_prefs_devkit.local_stack import control
from tests.helpers import boto_client, training_request, until_or_ended

pytestmark = pytest.mark.emulator

# Never freed in the all-busy-then-free scenario, so these jobs queue for as long as the test wants.
QUEUED = [
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
]


@pytest.fixture(autouse=True)
async def _close_watchers():
    yield
    await JobWatcher.close_all()


def _queue_jobs(server, count: int, prefix: str = "q") -> list[str]:
    client = boto_client(server.endpoint_url)
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        client.create_training_job(**training_request(name, QUEUED))
    return names


def _trigger(conn_id: str, name: str, interval: float = 0.3, server=None) -> SageMakerPreferenceJobTrigger:
    """A trigger as the operator defers it; with ``server``, seeded with what the operator last saw."""
    known = (
        KnownState.of(JobView.parse(TRAINING, server.engine.describe("training", name))).to_json() if server else None
    )
    return SageMakerPreferenceJobTrigger(
        job_name=name,
        job_kind="training",
        hook_kwargs={"aws_conn_id": conn_id, "region_name": "us-east-1"},
        wait_for="selection",
        poll_interval=interval,
        known_state=known,
    )


async def _run_for(triggers, seconds: float) -> list:
    tasks = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    done, pending = await asyncio.wait(tasks, timeout=seconds)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return [task.result().payload for task in done]


async def _run_until(triggers, done: Callable[[], bool], timeout: float = 120.0, *, delivered: int = 0) -> list:
    """The triggers' first events once ``done()`` holds and at least ``delivered`` triggers sent theirs (checked
    every tenth of a second), however long the machine takes to get there; TimeoutError past ``timeout``."""
    tasks = [asyncio.ensure_future(t.run().__anext__()) for t in triggers]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while not (done() and sum(task.done() for task in tasks) >= delivered):
            if loop.time() > deadline:
                raise TimeoutError(f"gave up after {timeout:.0f}s")
            await asyncio.sleep(0.1)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [task.result().payload for task in tasks if task.done() and not task.cancelled() and not task.exception()]


def _the_watcher() -> JobWatcher | None:
    return next(iter(JobWatcher._by_loop.get(asyncio.get_running_loop(), {}).values()), None)


def _three_rounds() -> bool:
    return (watcher := _the_watcher()) is not None and watcher.list_rounds >= 3


def _three_sweeps() -> bool:
    return (watcher := _the_watcher()) is not None and watcher.sweep_calls >= 3


async def test_calls_per_interval_do_not_grow_with_waiting_jobs(start_emulator, aws_connection, monkeypatch):
    # Safety-net Describes are spread over their whole period, so one may fall in any short window: push the
    # period far past this test, which is about listing.
    monkeypatch.setattr(watcher_module, "SAFETY_NET_SECONDS", 1e6)
    server = start_emulator("all-busy-then-free")
    names = _queue_jobs(server, 100)
    conn = aws_connection(server)

    assert await _run_until([_trigger(conn, n, server=server) for n in names], _three_rounds) == []
    watcher = _the_watcher()
    assert watcher is not None
    await JobWatcher.close_all()  # no round starts between the two counts read below
    calls = server.engine.calls
    assert calls["DescribeTrainingJob"] == 0, "seeded from the operator's view: listing alone watches them"
    # A hundred waiting jobs fit one page: one listing a round, never one a job.
    assert watcher.list_rounds <= calls["ListTrainingJobs"] <= watcher.list_rounds + 1, calls


async def test_a_quiet_account_lists_one_page_per_interval_after_a_fan_out(start_emulator, aws_connection, monkeypatch):
    # Safety-net Describes fire during the test (a fast net, a generous limiter) and must not rewind listing.
    monkeypatch.setattr(watcher_module, "SAFETY_NET_SECONDS", 3.0)
    monkeypatch.setattr(
        watcher_module.AdaptiveRateLimiter,
        "shared",
        classmethod(lambda cls, key, rate=5.0: cls(rate=1000.0, burst=1000.0)),
    )
    server = start_emulator("all-busy-then-free")
    names = _queue_jobs(server, 120)  # two pages of 100 whenever a listing re-reads the whole fan-out
    conn = aws_connection(server)
    assert await _run_until([_trigger(conn, n, server=server) for n in names], _three_rounds) == []
    (watcher,) = JobWatcher._by_loop[asyncio.get_running_loop()].values()
    assert watcher.list_calls <= watcher.list_rounds + 2, "only the first round may page through the fan-out"


async def test_without_a_known_state_each_job_is_described_once(start_emulator, aws_connection, monkeypatch):
    monkeypatch.setattr(watcher_module, "SAFETY_NET_SECONDS", 1e6)  # no sweep's Describes inside this test
    server = start_emulator("all-busy-then-free")
    names = _queue_jobs(server, 5)
    conn = aws_connection(server)

    def described_then_listed_thrice() -> bool:
        # Counted in rounds, not seconds: a fixed 3 s once ended before a loaded machine had described any.
        return server.engine.calls["DescribeTrainingJob"] >= 5 and _three_rounds()

    assert await _run_until([_trigger(conn, n) for n in names], described_then_listed_thrice) == []
    await JobWatcher.close_all()  # no round starts before the count read below
    assert server.engine.calls["DescribeTrainingJob"] == 5


async def test_changes_found_by_listing_are_described_and_delivered(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    names = _queue_jobs(server, 20)
    conn = aws_connection(server)
    running = asyncio.ensure_future(_run_for([_trigger(conn, n, server=server) for n in names], 30.0))
    await asyncio.sleep(1.0)
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 20})
    payloads = await running
    assert len(payloads) == 20 and {p["status"] for p in payloads} == {"selected"}
    assert server.engine.calls["DescribeTrainingJob"] <= 20 + 5, "only changed jobs are described"


async def test_denied_listing_falls_back_to_describes_and_says_so_once(start_emulator, aws_connection, caplog):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    control(server.endpoint_url, "faults", {"deny": ["ListTrainingJobs"]})
    names = _queue_jobs(server, 5)
    conn = aws_connection(server)

    def warnings() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "list_training_jobs failed" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="airflow_sm_prefs.wait.watcher"):
        running = asyncio.ensure_future(_run_for([_trigger(conn, n) for n in names], 120.0))
        # The jobs change only once the listing was denied, however long a busy machine takes to get there (a
        # fixed 1.5 s was once too short: the jobs were selected before the watcher had listed at all).
        await until_or_ended(running, lambda: bool(warnings()), "the denied listing to be said", timeout=60)
        assert warnings(), "the denied listing was never said"
        control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 5})
        payloads = await running
    assert {p["status"] for p in payloads} == {"selected"} and len(payloads) == 5
    assert len(warnings()) == 1 and "sagemaker:ListTrainingJobs" in warnings()[0].getMessage()


@pytest.fixture
def listing_misses_everything(monkeypatch):
    """The incremental listing finds no change, and the safety net runs every second."""

    async def nothing(self, client):
        return []

    monkeypatch.setattr(JobWatcher, "_list_changes", nothing)
    monkeypatch.setattr(watcher_module, "SAFETY_NET_SECONDS", 1.0)


async def test_safety_net_catches_a_change_listing_missed(start_emulator, aws_connection, listing_misses_everything):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    names = _queue_jobs(server, 3)
    conn = aws_connection(server)
    running = asyncio.ensure_future(_run_for([_trigger(conn, n) for n in names], 30.0))
    await asyncio.sleep(0.5)
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 3})
    assert {p["status"] for p in await running} == {"selected"}


def test_two_triggerers_each_with_their_own_watcher(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free")
    conn = aws_connection(server)
    groups = [_queue_jobs(server, 5, prefix=f"ha{i}") for i in range(2)]
    results: dict[int, list] = {}

    def triggerer(index: int) -> None:
        async def main() -> None:
            try:
                results[index] = await _run_for([_trigger(conn, n) for n in groups[index]], 30.0)
            finally:
                await JobWatcher.close_all()

        asyncio.run(main())

    threads = [threading.Thread(target=triggerer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    threading.Event().wait(1.5)
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 10})
    for thread in threads:
        thread.join(60)
    for index in range(2):
        assert sorted(p["job_name"] for p in results[index]) == sorted(groups[index])


def test_a_trigger_moved_to_another_triggerer_resumes_without_a_duplicate_event(start_emulator, aws_connection):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn = aws_connection(server)
    (name,) = _queue_jobs(server, 1)
    original = _trigger(conn, name)

    async def first_triggerer() -> list:
        try:
            return await _run_for([original], 1.0)  # shut down while the job still queues
        finally:
            await JobWatcher.close_all()

    assert asyncio.run(first_triggerer()) == []
    classpath, kwargs = original.serialize()
    module, _, class_name = classpath.rpartition(".")
    moved = getattr(importlib.import_module(module), class_name)(**kwargs)

    async def second_triggerer() -> list:
        try:
            running = asyncio.ensure_future(_run_for([moved], 30.0))
            await asyncio.sleep(0.5)
            control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 1})
            return await running
        finally:
            await JobWatcher.close_all()

    payloads = asyncio.run(second_triggerer())
    assert [p["status"] for p in payloads] == ["selected"]


async def _all_events(trigger: SageMakerPreferenceJobTrigger, seconds: float) -> list:
    """Every event the trigger yields until its generator ends (a trigger must end after one)."""
    events = []

    async def drain() -> None:
        async for event in trigger.run():
            events.append(event.payload)

    await asyncio.wait_for(drain(), timeout=seconds)
    return events


def test_several_triggerers_watching_the_same_job_each_deliver_exactly_one_event(start_emulator, aws_connection):
    """HA: three triggerers (own loops, own watchers), two triggers each, all on one job."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    conn = aws_connection(server)
    (name,) = _queue_jobs(server, 1, prefix="shared")
    results: dict[int, list[list]] = {}

    def triggerer(index: int) -> None:
        async def main() -> None:
            try:
                triggers = [_trigger(conn, name, server=server if copy else None) for copy in (0, 1)]
                results[index] = list(await asyncio.gather(*(_all_events(t, 30.0) for t in triggers)))
            finally:
                await JobWatcher.close_all()

        asyncio.run(main())

    threads = [threading.Thread(target=triggerer, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    threading.Event().wait(1.5)
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 1})
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [0, 1, 2]
    for per_trigger in results.values():
        assert [[(e["status"], e["job_name"]) for e in events] for events in per_trigger] == [
            [("selected", name)],
            [("selected", name)],
        ]


async def test_the_safety_net_lists_pages_and_describes_only_what_differs(
    start_emulator, aws_connection, listing_misses_everything
):
    """With the incremental listing missing everything, the half-hourly sweep (here every second) finds the 5
    jobs of 30 that changed with one page per sweep, and describes those only."""
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    names = _queue_jobs(server, 30)
    conn = aws_connection(server)
    triggers = [_trigger(conn, n, server=server) for n in names]  # seeded with the 30 queued
    control(server.endpoint_url, "capacity", {"ml.p4d.24xlarge": 5})  # room for 5 of the 30
    payloads = await _run_until(triggers, _three_sweeps, delivered=5)
    assert len(payloads) == 5 and {p["status"] for p in payloads} == {"selected"}
    # Only the 5 that changed, once per change a sweep saw (selected, then starting): never the 25 still queued.
    assert 5 <= server.engine.calls["DescribeTrainingJob"] <= 15
