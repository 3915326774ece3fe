"""The log cursor: what a reader that starts again from it shows, and what it never shows twice."""

from __future__ import annotations

from airflow_sm_prefs.wait.log_follower import LogCursor, LogLine, LogListing, events_in_order


def _event(ms: int, event_id: str, stream: str = "job/algo-1-1", message: str = "m") -> dict:
    return {"timestamp": ms, "eventId": event_id, "logStreamName": stream, "message": message}


def _ids(events: list[dict]) -> list[str]:
    return [e["eventId"] for e in events]


def test_events_after_the_cursor_are_fresh_and_the_cursor_counts_what_was_read_at_its_millisecond():
    listing = LogListing(LogCursor())
    fresh = listing.page([_event(10, "a"), _event(20, "b"), _event(20, "c", "job/algo-2-1")])
    assert _ids(fresh) == ["a", "b", "c"]
    assert listing.cursor == LogCursor(20, (("job/algo-1-1", 1), ("job/algo-2-1", 1)))


def test_a_listing_from_the_cursor_passes_over_what_was_read_at_its_millisecond_stream_by_stream():
    """startTime is inclusive: a listing from the cursor holds its millisecond's events again."""
    cursor = LogCursor(20, (("job/algo-1-1", 2),))
    listing = LogListing(cursor)
    page = [_event(20, "b"), _event(20, "c"), _event(20, "x", "job/algo-2-1"), _event(20, "d"), _event(30, "e")]
    assert _ids(listing.page(page)) == ["x", "d", "e"]
    assert listing.cursor == LogCursor(30, (("job/algo-1-1", 1),))
    again = LogListing(listing.cursor)
    assert again.page([_event(30, "e")]) == [] and again.cursor == listing.cursor


def test_counts_at_one_millisecond_accumulate_over_pages_and_listings():
    listing = LogListing(LogCursor(20, (("job/algo-1-1", 1),)))
    assert _ids(listing.page([_event(20, "b")])) == []
    assert _ids(listing.page([_event(20, "c"), _event(20, "d")])) == ["c", "d"]
    assert listing.cursor == LogCursor(20, (("job/algo-1-1", 3),))
    assert _ids(LogListing(listing.cursor).page([_event(20, n) for n in "bcde"])) == ["e"]


def test_a_stream_the_cursor_has_not_read_at_its_millisecond_keeps_the_others_counts():
    listing = LogListing(LogCursor(20, (("job/algo-1-1", 2),)))
    assert _ids(listing.page([_event(20, "y", "job/algo-2-1")])) == ["y"]
    assert listing.cursor == LogCursor(20, (("job/algo-1-1", 2), ("job/algo-2-1", 1)))


def test_the_cursor_stays_small_whatever_one_millisecond_holds():
    import json

    listing = LogListing(LogCursor())
    listing.page([_event(5, f"{n:08d}", f"job/algo-{n % 4}-1") for n in range(30_000)])
    assert len(json.dumps(listing.cursor.to_json())) < 200


def test_the_cursor_round_trips_through_json_and_refuses_garbage():
    cursor = LogCursor(1796054490599, (("job/algo-1-1", 3), ("job/algo-2-1", 1)))
    assert LogCursor.from_json(cursor.to_json()) == cursor
    for garbage in (None, "text", {"after": "soon"}, {"read_at_after": {}}, [1, 2]):
        assert LogCursor.from_json(garbage) is None
    assert LogCursor.from_json({"after": 7, "read_at_after": {"s": "many", "t": -1, "u": 2}}) == LogCursor(
        7, (("u", 2),)
    )


def test_an_earlier_releases_cursor_of_event_ids_restarts_at_its_millisecond():
    """Its ids cannot become counts: that millisecond's lines may show again, none is lost."""
    assert LogCursor.from_json({"after": 20, "seen": ["b", "c"]}) == LogCursor(20)


def test_lines_render_with_their_stream_and_lose_a_trailing_newline():
    (event,) = events_in_order({"events": [_event(1, "a", "job/algo-2-5", "epoch 1/5\n")]})
    assert LogLine.of(event).render() == "[job/algo-2-5] epoch 1/5"


def test_events_are_shown_by_time_then_stream_and_keep_the_listings_order_within_both():
    page = {
        "events": [
            _event(2, "z", "job/algo-1-1"),
            _event(1, "y", "job/algo-2-1"),
            _event(1, "x2", "job/algo-1-1"),
            _event(1, "x1", "job/algo-1-1"),
        ]
    }
    assert [e["eventId"] for e in events_in_order(page)] == ["x2", "x1", "y", "z"]
