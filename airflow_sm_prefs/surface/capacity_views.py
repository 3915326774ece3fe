"""What the API server keeps of the capacity ledger between requests, so the Capacity page answers at once.

Reading 100,000 jobs and computing the report over them takes seconds; a page is asked for far more often than a
job ends. Three things keep it quick:

- each DAG folder's reading is kept while its files are unchanged (``reading_memo.ReadingMemo``);
- each view (a page's HTML, a report's rows) is kept while no folder it rests on changed;
- a page is computed in the background, and a request waits for it only a bounded time (``PAGE_BUDGET_SECONDS``):
  past it, the page last computed for the same user, window and view is served, saying when it was computed and
  that a newer one is on its way; with none yet, a short page says the report is being computed and reloads.

On object storage, one listing says what changed (each object's ETag): only new or replaced objects are
fetched, and a view is kept while its folders list the same. Past ``[sm_prefs] ledger_compact_after`` old job
objects, the ledger is folded into month objects in a thread of its own (``ledger_compaction``), one at a time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from airflow_sm_prefs.evidence import ledger, ledger_reading, reading_memo, report_reading

log = logging.getLogger(__name__)

T = TypeVar("T")
# How long a page request waits for a fresh page before it is answered with the last one (or a "computing" page).
PAGE_BUDGET_SECONDS = 1.5
FOLD_THREAD = "sm-prefs-compaction"  # alive exactly while a page's fold of the ledger runs


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A view, or None while the first one is computed; ``computed_at`` (epoch seconds) when it is not fresh.
    ``store_problem``: what the shared store did the last time this view was computed, failing since
    ``store_failing_since`` (epoch seconds); None while it answers."""

    value: T | None
    computed_at: float | None = None
    store_problem: str | None = None
    store_failing_since: float | None = None

    @property
    def fresh(self) -> bool:
        return self.value is not None and self.computed_at is None


class Views:
    MAX_VIEWS = 64  # distinct (user's DAGs, window, view) kept; each a report's rows or a page's HTML

    def __init__(self) -> None:
        self.memo = reading_memo.ReadingMemo()
        self._views: OrderedDict[Any, Any] = OrderedDict()
        self._latest: dict[Hashable, tuple[float, Any]] = {}
        self._failing: dict[Hashable, tuple[float, str]] = {}  # since when, and what the store did
        self._start_threads()

    def _start_threads(self) -> None:
        self._process = os.getpid()
        self._lock = threading.Lock()
        self._running: dict[Hashable, Future[Any]] = {}
        # One page computed at a time: the work is CPU-bound, and a second thread would only slow the first.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sm-prefs-capacity")
        # Folding the ledger takes a while and answers nobody: apart from the pages, one at a time, each in a
        # thread that lives as long as its fold (a fold is rare; no idle thread waits for the next one).
        self._compacting: Future[Any] | None = None

    def _own_threads(self) -> None:
        """A process forked after these pools ran work inherits them without their threads (and perhaps a held
        lock): work submitted there would never run. It starts its own; the work under way was the parent's.
        (Airflow's gunicorn preloads the app before any request, so its workers never meet this; a test harness
        that forks after the tests, as mutmut does, did.)"""
        if self._process != os.getpid():
            self._start_threads()

    def reading(self, dags: set[str] | frozenset[str]) -> ledger_reading.Reading:
        root = ledger.location()
        reading = report_reading.reading(root, self.memo, dags)
        if report_reading.due(reading):
            self._fold_when_due(root, reading)
        return reading

    def _fold_when_due(self, root: Any, reading: ledger_reading.Reading) -> None:
        self._own_threads()
        with self._lock:
            if self._compacting is not None and not self._compacting.done():
                return
            self._compacting = _in_a_thread_of_its_own(FOLD_THREAD, _fold, root, reading)

    def view(self, reading: ledger_reading.Reading, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, or what it returned for the same ``key`` over the same ledger files."""
        if reading.signature is None or any(part is None for _, part in reading.signature):
            return compute()  # a folder whose state is unknown (object storage): never trusted
        full_key = (reading.signature, key)
        with self._lock:
            if full_key in self._views:
                self._views.move_to_end(full_key)
                return self._views[full_key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            self._views[full_key] = value
            while len(self._views) > self.MAX_VIEWS:
                self._views.popitem(last=False)
        return value

    def latest(self, key: Hashable, work: Callable[[], T], budget: float | None = None) -> Answer[T]:
        """``work()`` (read the ledger, then ``view``) in the background, waited for at most ``budget`` seconds;
        past it, the value ``work`` last returned for ``key``, with when. A request while ``key``'s work runs
        waits for that run rather than starting another."""
        self._own_threads()
        with self._lock:
            running = self._running.get(key)
            if running is None:
                running = self._worker.submit(self._refresh, key, work)
                self._running[key] = running
        try:
            return Answer(running.result(timeout=PAGE_BUDGET_SECONDS if budget is None else budget))
        except FutureTimeout:
            pass
        except Exception as error:
            if store_problem(error) is None:
                raise  # a setting (the page says which) or a bug
        with self._lock:
            last, failing = self._latest.get(key), self._failing.get(key)
        since, problem = failing if failing is not None else (None, None)
        if last is None:
            return Answer(None, None, problem, since)
        return Answer(last[1], last[0], problem, since)

    def _refresh(self, key: Hashable, work: Callable[[], T]) -> T:
        try:
            value = work()
        except Exception as error:
            problem = store_problem(error)
            if problem is not None:
                with self._lock:
                    since = self._failing.pop(key, (time.time(), ""))[0]
                    self._failing[key] = (since, problem)
                    while len(self._failing) > self.MAX_VIEWS:
                        self._failing.pop(next(iter(self._failing)))
            raise
        else:
            with self._lock:
                self._failing.pop(key, None)
                self._latest.pop(key, None)  # the most recently refreshed key goes last, evicted last
                self._latest[key] = (time.time(), value)
                while len(self._latest) > self.MAX_VIEWS:
                    self._latest.pop(next(iter(self._latest)))
            return value
        finally:
            with self._lock:
                self._running.pop(key, None)


def _in_a_thread_of_its_own(name: str, work: Callable[..., T], *arguments: Any) -> Future[T]:
    """``work(*arguments)`` started in a new thread called ``name``; its outcome, once it ends, in the future."""
    outcome: Future[T] = Future()

    def run() -> None:
        if not outcome.set_running_or_notify_cancel():
            return
        try:
            outcome.set_result(work(*arguments))
        except BaseException as error:  # handed to whoever reads the future, whatever it is
            outcome.set_exception(error)

    threading.Thread(target=run, name=name).start()
    return outcome


def store_problem(error: BaseException) -> str | None:
    """What the shared store did, when ``error`` is its failure to answer (not a setting, which the page's own
    error handler names); None otherwise."""
    from airflow_sm_prefs.storage import store_errors

    problem = store_errors.explained(error)
    if problem is None or problem.setting:
        return None
    return problem.line("the shared store holding the capacity ledger")


def _fold(root: Any, reading: ledger_reading.Reading) -> report_reading.Fold | None:
    """The page's fold, in its own thread: nobody waits on it, so a refusal is said in the API server's log."""
    fold = report_reading.fold_if_due(root, reading)
    if fold is not None and fold.refused is not None:
        problem = store_problem(fold.refused) or f"{type(fold.refused).__name__}: {fold.refused}"
        log.warning("Could not fold the capacity ledger's old entries: %s", problem)
    return fold
