"""The log cursor: what a reader that starts again from it shows, and what it never shows twice."""

from __future__ import annotations

from airflow_sm_prefs.wait.log_follower import LogCursor, LogLine, events_in_order


def _event(ms: int, event_id: str, stream: str = "job/algo-1-1", message: str = "m") -> dict:
    return {"timestamp": ms, "eventId": event_id, "logStreamName": stream, "message": message}


def test_events_after_the_cursor_are_fresh_and_the_cursor_moves_past_them():
    cursor = LogCursor()
    fresh, cursor = cursor.advanced([_event(10, "a"), _event(20, "b")])
    assert [e["eventId"] for e in fresh] == ["a", "b"]
    assert cursor == LogCursor(20, ("b",))


def test_a_reread_from_the_cursor_shows_only_what_is_new_at_the_same_millisecond():
    """startTime is inclusive: a re-read returns the events at the cursor's time again; only new ids show."""
    cursor = LogCursor(20, ("b",))
    fresh, cursor = cursor.advanced([_event(20, "b"), _event(20, "c"), _event(30, "d")])
    assert [e["eventId"] for e in fresh] == ["c", "d"]
    again, same = cursor.advanced([_event(30, "d")])
    assert again == [] and same == cursor


def test_ids_at_the_same_time_accumulate():
    cursor = LogCursor(20, ("b",))
    fresh, cursor = cursor.advanced([_event(20, "b"), _event(20, "c")])
    assert [e["eventId"] for e in fresh] == ["c"] and cursor == LogCursor(20, ("b", "c"))


def test_the_cursor_round_trips_through_json_and_refuses_garbage():
    cursor = LogCursor(1796054490599, ("x", "y"))
    assert LogCursor.from_json(cursor.to_json()) == cursor
    for garbage in (None, "text", {"after": "soon"}, {"seen": []}, [1, 2]):
        assert LogCursor.from_json(garbage) is None


def test_lines_render_with_their_stream_and_lose_a_trailing_newline():
    (event,) = events_in_order({"events": [_event(1, "a", "job/algo-2-5", "epoch 1/5\n")]})
    assert LogLine.of(event).render() == "[job/algo-2-5] epoch 1/5"


def test_events_are_shown_by_time_then_stream():
    page = {"events": [_event(2, "z", "job/algo-1-1"), _event(1, "y", "job/algo-2-1"), _event(1, "x", "job/algo-1-1")]}
    assert [e["eventId"] for e in events_in_order(page)] == ["x", "y", "z"]
