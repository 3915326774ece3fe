"""A trigger's requests to Airflow's supervisor (its task's state, the log cursor in XCom, Variables to mask).

A trigger can be cancelled at any await: its task marked failed or cleared, the triggerer stopping. On Airflow
3.1 and 3.2 the triggerer has one channel to its supervisor and reads each answer right after its request, in
the coroutine that asked. ``sync_to_async`` passes a cancellation on to that coroutine (asgiref >= 3.8), which
then leaves its answer unread: the next request, usually the triggerer's own report of trigger events, reads it
instead, raises "Response read out of order!" and ends the triggerer with every trigger it ran. Airflow 3.3
matches answers to requests by id and is not hurt. So every request here is shielded: a cancelled trigger stops
waiting at once, and the request reads its own answer in the background.

Every call goes through the Task SDK's synchronous functions in ``sync_to_async``, on every Airflow line: one
path to test, where the async variants exist only from 3.3.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

_Answer = TypeVar("_Answer")


async def ask(call: Callable[..., _Answer], *args: Any, **kwargs: Any) -> _Answer:
    """``call(*args, **kwargs)`` in a thread, carried to its end even if the awaiting trigger is cancelled."""
    from asgiref.sync import sync_to_async

    request = asyncio.ensure_future(sync_to_async(call)(*args, **kwargs))
    request.add_done_callback(_retrieve_outcome)
    return await asyncio.shield(request)


def _retrieve_outcome(request: asyncio.Future[Any]) -> None:
    # A request its trigger stopped waiting for has nobody to raise to; retrieving its outcome keeps asyncio
    # from logging "exception was never retrieved" for a failure the trigger no longer cares about.
    if not request.cancelled():
        request.exception()
