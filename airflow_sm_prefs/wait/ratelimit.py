"""An asyncio token bucket that backs off when the service throttles (additive increase, multiplicative decrease).

Written here rather than taken from ``aiolimiter`` because the rate must react to ``ThrottlingException``
answers: one account's SageMaker API rate is shared by every trigger in the process.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import ClassVar

_Key = tuple[object, ...]


class AdaptiveRateLimiter:
    # Per event loop: its lock belongs to the loop, and a limiter dies with it.
    _shared: ClassVar[
        weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[object, ...], AdaptiveRateLimiter]]
    ] = weakref.WeakKeyDictionary()

    def __init__(self, rate: float = 5.0, burst: float = 10.0, floor: float = 0.2) -> None:
        self.ceiling = rate
        self.rate = rate
        self.burst = burst
        self.floor = floor
        self._tokens = burst
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    @classmethod
    def shared(cls, key: tuple[object, ...], rate: float = 5.0) -> AdaptiveRateLimiter:
        """The running loop's limiter for ``key`` (connection, Region): all job kinds of an account share it."""
        limiters = cls._shared.setdefault(asyncio.get_running_loop(), {})
        limiter = limiters.get(key)
        if limiter is None:
            limiter = limiters[key] = cls(rate=rate)
        return limiter

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self) -> None:
        async with self._lock:
            self._refill()
            while self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1.0

    def throttled(self) -> None:
        """The service said 'Rate exceeded': halve the rate and drop the saved-up burst."""
        self.rate = max(self.floor, self.rate / 2.0)
        self._tokens = min(self._tokens, 0.0)

    def succeeded(self) -> None:
        self.rate = min(self.ceiling, self.rate + 0.05 * self.ceiling)
