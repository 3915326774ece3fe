"""A trigger cancelled in the middle of a request to its supervisor, on the installed Airflow's real triggerer
channel (``TriggerCommsDecoder``) with a supervisor of our own at the other end of a socket pair.

On Airflow 3.1 and 3.2 a request cut in half leaves its answer in the channel, and the triggerer's next request
reads it and dies ("Response read out of order!"): the triggerer crash seen in the fault campaign on 3.2.1. The
platform matrix runs this file on each Airflow line the project supports.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from airflow.jobs.triggerer_job_runner import TriggerCommsDecoder
from airflow.sdk.execution_time import comms, task_runner

from airflow_sm_prefs.platform import supervisor_calls

SCOPE = {"dag_id": "nightly", "task_id": "train", "run_id": "manual__1", "map_index": -1}
# Airflow 3.3 matches answers to requests by id (it starts a reader first); 3.1 and 3.2 read in turn.
MATCHES_ANSWERS_BY_ID = hasattr(TriggerCommsDecoder, "start_reader")


class Supervisor:
    """The supervisor's end: answers each GetXCom with its key as the value, the first one only when released."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.first_request_arrived = asyncio.Event()
        self.release_first_answer = asyncio.Event()

    async def serve(self) -> None:
        requests = msgspec.msgpack.Decoder(comms._RequestFrame)
        first = True
        while True:
            length = int.from_bytes(await self.reader.readexactly(4), "big")
            frame = requests.decode(await self.reader.readexactly(length))
            if first:
                first = False
                self.first_request_arrived.set()
                await self.release_first_answer.wait()
            key = frame.body["key"]
            answer = comms._ResponseFrame(id=frame.id, body={"type": "XComResult", "key": key, "value": key})
            self.writer.write(answer.as_bytes())
            await self.writer.drain()


@pytest.fixture
async def channel() -> AsyncIterator[tuple[TriggerCommsDecoder, Supervisor]]:
    trigger_end, supervisor_end = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=trigger_end)
    decoder = TriggerCommsDecoder(async_reader=reader, async_writer=writer, socket=trigger_end)
    if MATCHES_ANSWERS_BY_ID:
        await decoder.start_reader()
    supervisor = Supervisor(*await asyncio.open_connection(sock=supervisor_end))
    serving = asyncio.create_task(supervisor.serve())
    saved = getattr(task_runner, "SUPERVISOR_COMMS", None)
    task_runner.SUPERVISOR_COMMS = decoder
    try:
        yield decoder, supervisor
    finally:
        task_runner.SUPERVISOR_COMMS = saved
        serving.cancel()
        writer.close()
        supervisor.writer.close()


def _read_xcom(key: str) -> Any:
    """What the Task SDK's synchronous calls do from a trigger's thread."""
    return task_runner.SUPERVISOR_COMMS.send(comms.GetXCom(key=key, **SCOPE))


async def _cancel_mid_request(supervisor: Supervisor, request: Callable[[], Any]) -> asyncio.Task[Any]:
    trigger = asyncio.create_task(request())
    await asyncio.wait_for(supervisor.first_request_arrived.wait(), 30)
    trigger.cancel()
    with pytest.raises(asyncio.CancelledError):
        await trigger
    supervisor.release_first_answer.set()
    return trigger


async def test_a_cancelled_request_never_leaves_its_answer_to_the_next(channel):
    decoder, supervisor = channel
    await _cancel_mid_request(supervisor, lambda: supervisor_calls.ask(_read_xcom, "cursor"))

    # The triggerer's own next request (its report of trigger events, in real life) gets its own answer.
    answer = await asyncio.wait_for(decoder.asend(comms.GetXCom(key="next", **SCOPE)), 30)
    assert answer.key == "next"


async def test_the_cancelled_trigger_stops_waiting_at_once(channel):
    _, supervisor = channel
    trigger = asyncio.create_task(supervisor_calls.ask(_read_xcom, "cursor"))
    await asyncio.wait_for(supervisor.first_request_arrived.wait(), 30)
    trigger.cancel()
    # Cancelled while the supervisor still holds the answer back: nothing waits for it.
    with pytest.raises(asyncio.CancelledError):
        await trigger
    assert not supervisor.release_first_answer.is_set()
    supervisor.release_first_answer.set()


async def test_a_request_that_is_not_cancelled_gets_its_answer(channel):
    _, supervisor = channel
    supervisor.release_first_answer.set()
    answer = await asyncio.wait_for(supervisor_calls.ask(_read_xcom, "cursor"), 30)
    assert answer.key == "cursor" and answer.value == "cursor"


@pytest.mark.skipif(MATCHES_ANSWERS_BY_ID, reason="this Airflow matches answers to requests by id")
async def test_without_the_shield_this_airflow_hands_the_answer_to_the_next_request(channel):
    """Why ``supervisor_calls`` exists: the same request through plain ``sync_to_async`` breaks the channel."""
    from asgiref.sync import sync_to_async

    decoder, supervisor = channel
    await _cancel_mid_request(supervisor, lambda: sync_to_async(_read_xcom)("cursor"))
    with pytest.raises(RuntimeError, match="out of order"):
        await asyncio.wait_for(decoder.asend(comms.GetXCom(key="next", **SCOPE)), 30)
