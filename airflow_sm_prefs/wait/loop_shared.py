"""Background readers shared by every trigger of one event loop: the status watcher and the log follower.

A triggerer runs all its triggers in one loop, so one reader per key (connection settings, job kind or log
group) serves them all. Each reader belongs to the loop it was made in (its client, lock and task do), and
is found again by its key while that loop lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    from airflow_sm_prefs.wait.ratelimit import AdaptiveRateLimiter

# Builds the reader's one client (an async context manager), in the loop that uses it.
ClientFactory = Callable[[], Awaitable[Any]]


class LoopShared:
    _by_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]]]
    task_name: ClassVar[str] = "sm-prefs-reader"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._by_loop = weakref.WeakKeyDictionary()  # one registry per kind of reader

    def __init__(self, key: tuple[Any, ...], client_factory: ClientFactory, limiter: AdaptiveRateLimiter) -> None:
        self.key = key
        self._client_factory = client_factory
        self._limiter = limiter  # shared per account and Region: every reader of theirs draws on it
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def _shared_instance(cls, key: tuple[Any, ...], make: Callable[[], Self]) -> Self:
        registry = cls._by_loop.setdefault(asyncio.get_running_loop(), {})
        found: Self | None = registry.get(key)
        if found is None:
            found = registry[key] = make()
        return found

    def _unregister(self) -> None:
        """Leave the registry (an idle reader that stops); the next trigger makes a fresh one."""
        registry = type(self)._by_loop.get(asyncio.get_running_loop(), {})
        if registry.get(self.key) is self:
            registry.pop(self.key, None)

    @classmethod
    async def close_all(cls) -> None:
        """Stop this event loop's readers of this kind (tests; a triggerer simply exits)."""
        for reader in list(cls._by_loop.pop(asyncio.get_running_loop(), {}).values()):
            if reader._task is not None:
                reader._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader._task

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.task_name}-{self.key[-1]}")

    async def _run(self) -> None:
        raise NotImplementedError
