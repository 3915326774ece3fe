"""Log streaming against more lines than a page holds at one timestamp, and lines a hostile job writes.

The fake answers ``FilterLogEvents`` as CloudWatch documents it: events from ``startTime`` in time order, at
most ``limit`` a page, and a ``nextToken`` bound to the query while more remain.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.wait.log_follower import MAX_LINE_CHARS, LogCursor, LogFollower, LogLine
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


async def _drained(logs: CloudWatchLogs, cursor: LogCursor | None = None) -> list[LogLine]:
    async def factory() -> AsyncCloudWatchLogs:
        return AsyncCloudWatchLogs(logs)

    follower = LogFollower(("k",), "/aws/sagemaker/TrainingJobs", factory, AdaptiveRateLimiter(rate=1000, burst=1000))
    lines: list[LogLine] = []
    async with follower.follow("job", cursor or LogCursor(), 1.0) as queue:
        await follower.drain("job")
        while not queue.empty():
            lines += queue.get_nowait().lines
    return lines


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
    seen = LogCursor(1000, tuple(f"{n:08d}" for n in range(1500)))
    logs.write(3, at=1000, prefix="same second")
    again = await _drained(logs, seen)
    assert len(first) == 1500 and [line.message for line in again] == [f"same second {n}" for n in range(1500, 1503)]


def test_the_blocking_reader_pages_the_same_way():
    logs = CloudWatchLogs()
    logs.write(2500, at=1000)
    logs.write(1, at=1001, prefix="after")
    task_log = TaskLog()
    reader = BlockingLogReader(logs, TRAINING, "job", task_log, LogCursor())
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
