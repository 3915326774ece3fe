"""What the API server keeps of the capacity ledger between requests, so the Capacity page answers at once.

Reading 100,000 jobs and computing the report over them takes seconds; a page is asked for far more often than a
job ends. Three things keep it quick:

- each DAG folder's reading is kept while its files are unchanged (``ledger.ReadingMemo``);
- each view (a page's HTML, a report's rows) is kept while no folder it rests on changed;
- a page is computed in the background, and a request waits for it only a bounded time (``PAGE_BUDGET_SECONDS``):
  past it, the page last computed for the same user, window and view is served, saying when it was computed and
  that a newer one is on its way; with none yet, a short page says the report is being computed and reloads.

Object storage gives no cheap way to tell whether a folder changed, so views over it are computed for each
request (as ``ledger.read`` would), in the background all the same.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from airflow_sm_prefs.evidence import ledger

T = TypeVar("T")
# How long a page request waits for a fresh page before it is answered with the last one (or a "computing" page).
PAGE_BUDGET_SECONDS = 1.5


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A view, or None while the first one is computed; ``computed_at`` (epoch seconds) when it is not fresh."""

    value: T | None
    computed_at: float | None = None

    @property
    def fresh(self) -> bool:
        return self.value is not None and self.computed_at is None


class Views:
    MAX_VIEWS = 64  # distinct (user's DAGs, window, view) kept; each a report's rows or a page's HTML

    def __init__(self) -> None:
        self.memo = ledger.ReadingMemo()
        self._views: OrderedDict[Any, Any] = OrderedDict()
        self._latest: dict[Hashable, tuple[float, Any]] = {}
        self._running: dict[Hashable, Future[Any]] = {}
        self._lock = threading.Lock()
        # One page computed at a time: the work is CPU-bound, and a second thread would only slow the first.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sm-prefs-capacity")

    def reading(self, dags: set[str] | frozenset[str]) -> ledger.Reading:
        return ledger.read(dags=dags, fields=ledger.REPORT_FIELDS, memo=self.memo)

    def view(self, reading: ledger.Reading, key: Hashable, compute: Callable[[], T]) -> T:
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
        with self._lock:
            running = self._running.get(key)
            if running is None:
                running = self._worker.submit(self._refresh, key, work)
                self._running[key] = running
        try:
            return Answer(running.result(timeout=PAGE_BUDGET_SECONDS if budget is None else budget))
        except FutureTimeout:
            with self._lock:
                last = self._latest.get(key)
            return Answer(last[1], last[0]) if last is not None else Answer(None)

    def _refresh(self, key: Hashable, work: Callable[[], T]) -> T:
        try:
            value = work()
            with self._lock:
                self._latest.pop(key, None)  # the most recently refreshed key goes last, evicted last
                self._latest[key] = (time.time(), value)
                while len(self._latest) > self.MAX_VIEWS:
                    self._latest.pop(next(iter(self._latest)))
            return value
        finally:
            with self._lock:
                self._running.pop(key, None)
