"""Log streaming against more lines than a page holds at one timestamp, and lines a hostile job writes.

The fake answers ``FilterLogEvents`` as CloudWatch documents it: events from ``startTime`` in time order, at
most ``limit`` a page, and a ``nextToken`` bound to the query while more remain.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.wait import log_follower, worker_logs
from airflow_sm_prefs.wait.log_follower import MAX_LINE_CHARS, LogBatch, LogCursor, LogFollower, LogLine
from airflow_sm_prefs.wait.ratelimit import AdaptiveRateLimiter
from airflow_sm_prefs.wait.worker_logs import BlockingLogReader
from tests.helpers import TaskLog


class CloudWatchLogs:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.calls = 0

    def write(self, count: int, at: int, stream: str = "job/algo-1-1", prefix: str = "line") -> None:
        first = len(self.events)
        self.events += [
            {
                "logStreamName": stream,
                "timestamp": at,
                "message": f"{prefix} {first + n}",
                "eventId": f"{first + n:08d}",
            }
            for n in range(count)
        ]

    def filter_log_events(self, startTime: int, limit: int, nextToken: str | None = None, **query: Any) -> dict:
        self.calls += 1
        matching = sorted((e for e in self.events if e["timestamp"] >= startTime), key=lambda e: e["timestamp"])
        offset = int(nextToken.split(":")[1]) if nextToken else 0
        if nextToken:
            assert nextToken.startswith(f"{startTime}:"), "a token is bound to its query"
        page = {"events": matching[offset : offset + limit]}
        if offset + limit < len(matching):
            page["nextToken"] = f"{startTime}:{offset + limit}"
        return page


class AsyncCloudWatchLogs:
    def __init__(self, logs: CloudWatchLogs) -> None:
        self.logs = logs

    async def filter_log_events(self, **request: Any) -> dict:
        return self.logs.filter_log_events(**request)

    async def __aenter__(self) -> AsyncCloudWatchLogs:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None


async def _batches(logs: CloudWatchLogs, cursor: LogCursor | None = None) -> list[LogBatch]:
    async def factory() -> AsyncCloudWatchLogs:
        return AsyncCloudWatchLogs(logs)

    follower = LogFollower(("k",), "/aws/sagemaker/TrainingJobs", factory, AdaptiveRateLimiter(rate=1000, burst=1000))
    batches: list[LogBatch] = []
    async with follower.follow("job", cursor or LogCursor(), 1.0) as queue:
        await follower.drain("job")
        while not queue.empty():
            batches.append(queue.get_nowait())
    return batches


async def _drained(logs: CloudWatchLogs, cursor: LogCursor | None = None) -> list[LogLine]:
    return [line for batch in await _batches(logs, cursor) for line in batch.lines]


def _long_log() -> CloudWatchLogs:
    """100,016 lines over two streams and three milliseconds, as a chatty job writes at its end."""
    logs = CloudWatchLogs()
    for at, second_streams_lines in ((1000, 16_667), (2000, 16_667), (3000, 16_666)):
        logs.write(16_672, at=at, stream="job/algo-1-1", prefix=f"one@{at}")
        logs.write(second_streams_lines, at=at, stream="job/algo-2-1", prefix=f"two@{at}")
    return logs


async def test_a_hundred_thousand_lines_at_three_milliseconds_all_appear_once_in_order_with_a_small_cursor():
    logs = _long_log()
    batches = await _batches(logs)
    lines = [line.message for batch in batches for line in batch.lines]
    assert len(lines) == len(logs.events) == 100_016
    assert lines == [e["message"] for e in sorted(logs.events, key=lambda e: (e["timestamp"], e["logStreamName"]))]
    assert logs.calls == 101, "one call a page, no page read twice"
    assert max(len(json.dumps(batch.cursor.to_json())) for batch in batches if batch.cursor) < 200


async def test_a_reader_started_again_from_any_saved_cursor_of_a_long_log_repeats_and_loses_nothing():
    logs = _long_log()
    batches = await _batches(logs)
    expected = [line.message for batch in batches for line in batch.lines]
    for cut in (1, 17, 50, 99):  # inside the first, second and third millisecond's lines
        shown = [line.message for batch in batches[:cut] for line in batch.lines]
        shown += [line.message for line in await _drained(logs, batches[cut - 1].cursor)]
        assert shown == expected, cut


async def test_the_end_reading_stops_at_its_bound_and_says_where_the_rest_is(monkeypatch):
    monkeypatch.setattr(log_follower, "DRAIN_SECONDS", 0.0)
    batches = await _batches(_long_log())
    *read, last = batches
    assert sum(len(batch.lines) for batch in read) == 1000, "one page, then the bound"
    assert last.left_unread is not None
    assert "CloudWatch Logs, group /aws/sagemaker/TrainingJobs, streams job/*" in last.left_unread


async def test_more_lines_at_one_timestamp_than_a_page_holds_all_appear_and_later_ones_too():
    logs = CloudWatchLogs()
    logs.write(1500, at=1000)
    logs.write(10, at=2000, prefix="later")
    lines = await _drained(logs)
    assert [line.message for line in lines] == [f"line {n}" for n in range(1500)] + [
        f"later {n}" for n in range(1500, 1510)
    ]


async def test_a_reader_started_again_from_its_cursor_shows_no_line_twice():
    logs = CloudWatchLogs()
    logs.write(1500, at=1000)
    first = await _drained(logs)
    seen = LogCursor(1000, (("job/algo-1-1", 1500),))
    logs.write(3, at=1000, prefix="same second")
    again = await _drained(logs, seen)
    assert len(first) == 1500 and [line.message for line in again] == [f"same second {n}" for n in range(1500, 1503)]


def test_the_blocking_reader_reads_a_long_log_whole():
    logs = _long_log()
    task_log = TaskLog()
    BlockingLogReader(logs, TRAINING, "job", log=task_log, cursor=LogCursor()).read()
    assert len(task_log.messages) == 100_016 and logs.calls == 101
    assert len(set(task_log.messages)) == 100_016


def test_the_blocking_reader_goes_on_from_the_page_its_bound_stopped_it_at(monkeypatch):
    monkeypatch.setattr(worker_logs, "DRAIN_SECONDS", 0.0)
    logs = CloudWatchLogs()
    logs.write(3500, at=1000)
    task_log = TaskLog()
    reader = BlockingLogReader(logs, TRAINING, "job", log=task_log, cursor=LogCursor())
    reader.read()
    assert len(task_log.messages) == 1000, "one page, then the bound; nothing said while the job runs"
    reader.read(last=True)
    assert len(task_log.messages) == 2001 and "the rest are in CloudWatch Logs" in task_log.messages[-1]
    reader.read()
    reader.read()
    shown = [message for message in task_log.messages if message.startswith("[")]
    assert shown == [f"[job/algo-1-1] line {n}" for n in range(3500)] and logs.calls == 4


def test_the_blocking_reader_pages_the_same_way():
    logs = CloudWatchLogs()
    logs.write(2500, at=1000)
    logs.write(1, at=1001, prefix="after")
    task_log = TaskLog()
    reader = BlockingLogReader(logs, TRAINING, "job", log=task_log, cursor=LogCursor())
    reader.read()
    assert len(task_log.messages) == 2501 and task_log.messages[-1].endswith("after 2500")
    reader.read()
    assert len(task_log.messages) == 2501, "nothing new, nothing shown again"


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("\x1b[2J\x1b[1;31mred\x1b[0m", "red"),
        ("\x1b]0;title\x07ok", "ok"),
        ("bell\x07 and \x00 nul", "bell\ufffd and \ufffd nul"),
        ("tab\tkept", "tab\tkept"),
        ("caf\udcc3 bad utf-8", "caf\ufffd bad utf-8"),
    ],
)
def test_a_line_is_shown_without_terminal_escapes_or_control_characters(written, shown):
    line = LogLine.of({"logStreamName": "job/algo-1-1\x1b[2J", "message": written + "\n", "timestamp": 1})
    assert (line.message, line.stream) == (shown, "job/algo-1-1")


def test_a_megabyte_line_is_cut_and_says_how_much_was_left_out():
    line = LogLine.of({"logStreamName": "s", "message": "x" * (1 << 20), "timestamp": 1})
    assert len(line.message) < MAX_LINE_CHARS + 50
    assert line.message.endswith(f"... ({(1 << 20) - MAX_LINE_CHARS} more characters)")


class _Tail:
    """``DescribeLogStreams`` and ``GetLogEvents`` (from the end) over two streams' events, as written."""

    def __init__(self, streams: dict[str, list[tuple[int, str]]]) -> None:
        self.streams = streams

    def describe_log_streams(self, **_: Any) -> dict:
        return {"logStreams": [{"logStreamName": name} for name in self.streams]}

    def get_log_events(self, logStreamName: str, limit: int, **_: Any) -> dict:
        written = self.streams[logStreamName][-limit:]
        return {"events": [{"timestamp": at, "message": message} for at, message in written]}


def test_a_failed_jobs_last_lines_keep_the_jobs_order_within_one_millisecond():
    from airflow_sm_prefs.wait.worker_logs import last_lines

    client = _Tail(
        {
            "job/algo-1-1": [(1, "epoch 9 done"), (2, "saving model"), (2, "Traceback (most recent call last):"),
                             (2, "RuntimeError: CUDA out of memory")],
            "job/algo-2-1": [(2, "algo-2 waiting")],
        }
    )  # fmt: skip
    lines = last_lines(client, TRAINING, "job", TaskLog(), count=4)
    assert lines == [
        "[job/algo-1-1] saving model",
        "[job/algo-1-1] Traceback (most recent call last):",
        "[job/algo-1-1] RuntimeError: CUDA out of memory",
        "[job/algo-2-1] algo-2 waiting",
    ]
