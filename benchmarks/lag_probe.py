"""A trigger that measures the event loop it runs in: deferred next to the triggers under test.

The triggerer logs only lags above 0.2 s; this probe samples every 50 ms sleep for a fixed window and
reports the delay distribution, so a real triggerer's loop lag can be read from the probe task's XCom.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

PERIOD = 0.05


class LagProbeTrigger(BaseTrigger):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__name__}", {"seconds": self.seconds}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        loop = asyncio.get_running_loop()
        lags: list[float] = []
        end = loop.time() + self.seconds
        while loop.time() < end:
            started = loop.time()
            await asyncio.sleep(PERIOD)
            lags.append(loop.time() - started - PERIOD)
        lags.sort()
        yield TriggerEvent(
            {
                "samples": len(lags),
                "p50_ms": 1000 * lags[len(lags) // 2],
                "p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
                "max_ms": 1000 * lags[-1],
            }
        )


class LagProbeOperator(BaseOperator):
    def __init__(self, *, seconds: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seconds = seconds

    def execute(self, context: Any) -> None:
        self.defer(
            trigger=LagProbeTrigger(self.seconds),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.seconds + 600),
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        return event
