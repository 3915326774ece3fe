"""The API server's kept views: a page request waits a bounded time, then answers with the last page or says
the first one is being computed. Driven by events, never by how fast the machine is."""

from __future__ import annotations

import os
import threading
import time

from airflow_sm_prefs.surface.capacity_page import _answered
from airflow_sm_prefs.surface.capacity_views import Answer, Views

PATIENT = 60.0  # long enough for work that is not held back to finish on any machine
IMPATIENT = 0.01  # work held back by an event is never done within it
FORKED_PATIENCE = 20.0  # a child whose pool runs its work answers within it on any machine


def held(value: str, release: threading.Event, calls: list[str]):
    def work() -> str:
        calls.append(value)
        release.wait(PATIENT)
        return value

    return work


def test_a_first_page_still_computing_is_said_so_and_the_next_request_gets_it():
    views, release, calls = Views(), threading.Event(), []
    assert views.latest("page", held("report v1", release, calls), IMPATIENT) == Answer(None)
    assert views.latest("page", held("report v1", release, calls), IMPATIENT) == Answer(None)
    release.set()
    assert views.latest("page", held("unused", release, calls), PATIENT) in (Answer("report v1"), Answer("unused"))
    assert calls[0] == "report v1" and calls.count("report v1") == 1, "a request joins the work already running"


def test_while_a_newer_page_is_computed_the_last_one_is_served_with_its_time():
    views, calls = Views(), []
    done = threading.Event()
    done.set()
    before = time.time()
    assert views.latest("page", held("report v1", done, calls), PATIENT) == Answer("report v1")
    release = threading.Event()
    stale = views.latest("page", held("report v2", release, calls), IMPATIENT)
    assert stale.value == "report v1" and stale.computed_at is not None and stale.computed_at >= before
    assert not stale.fresh
    release.set()
    assert views.latest("page", held("report v3", done, calls), PATIENT).value in ("report v2", "report v3")
    assert views.latest("other user's page", held("theirs", release, calls), PATIENT) == Answer("theirs")


def test_the_three_answers_read_as_what_they_are():
    computing = _answered("SageMaker capacity", Answer(None))
    assert "being computed" in computing and "http-equiv='refresh'" in computing
    fresh = _answered("SageMaker capacity", Answer("<table>rows</table>"))
    assert "<table>rows</table>" in fresh and "refresh" not in fresh and "As computed at" not in fresh
    stale = _answered("SageMaker capacity", Answer("<table>rows</table>", 1_796_176_800.0))
    assert "As computed at 2026-12-02 02:00:00 UTC" in stale and "<table>rows</table>" in stale


def test_work_that_fails_reaches_the_request_that_waits_for_it():
    views = Views()

    def broken() -> str:
        raise OSError("the ledger cannot be listed")

    try:
        views.latest("page", broken, PATIENT)
    except OSError as error:
        assert "cannot be listed" in str(error)
    else:
        raise AssertionError("the failure was swallowed")


def test_the_pages_kept_are_the_most_recently_refreshed(monkeypatch):
    views, done = Views(), threading.Event()
    done.set()
    monkeypatch.setattr(Views, "MAX_VIEWS", 2)
    for key in ("a", "b", "a", "c"):  # "a" refreshed after "b": "b" is the one to go
        views.latest(key, held(key, done, []), PATIENT)
    assert list(views._latest) == ["a", "c"]


def _unreachable() -> str:
    from botocore.exceptions import EndpointConnectionError

    raise EndpointConnectionError(endpoint_url="http://store.invalid/team-bucket")


def test_a_store_that_fails_is_said_with_since_when_over_the_last_page():
    views, done = Views(), threading.Event()
    done.set()
    assert views.latest("page", held("report v1", done, []), PATIENT) == Answer("report v1")
    before = time.time()
    first = views.latest("page", _unreachable, PATIENT)
    assert first.value == "report v1" and first.computed_at is not None and first.computed_at <= before
    assert first.store_problem is not None
    assert first.store_problem.startswith("the shared store holding the capacity ledger could not be reached; ")
    assert first.store_failing_since is not None and first.store_failing_since >= before
    again = views.latest("page", _unreachable, PATIENT)
    assert again.store_failing_since == first.store_failing_since, "since the first failure, not the latest"
    assert views.latest("page", held("report v2", done, []), PATIENT) == Answer("report v2"), "back: said no more"


def test_a_store_that_fails_before_any_page_says_so_and_reloads():
    answer = Views().latest("page", _unreachable, PATIENT)
    assert answer.value is None and answer.store_problem is not None
    page = _answered("SageMaker capacity", answer)
    assert "could not be reached" in page and "No page could be computed yet" in page
    assert "http-equiv='refresh'" in page


def test_the_last_page_under_a_failing_store_says_both_times():
    answer = Answer(
        "<table>rows</table>", 1_796_176_800.0, "the shared store ... did not answer in time", 1_796_180_400.0
    )
    page = _answered("SageMaker capacity", answer)
    assert "Since 2026-12-02 03:00:00 UTC, the shared store ... did not answer in time." in page
    assert "Shown: the page as computed at 2026-12-02 02:00:00 UTC." in page and "<table>rows</table>" in page


def test_a_process_forked_after_pages_were_computed_computes_its_own():
    """A fork keeps the pools but not their threads: work submitted in the child would never run. mutmut forks
    its mutants from a process whose unit tests computed pages, and every mutant those tests covered then
    waited out its timeout, which counts as caught."""
    views, done = Views(), threading.Event()
    done.set()
    assert views.latest("page", held("the parent's", done, []), PATIENT) == Answer("the parent's")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and never returns to pytest
        try:
            answer = views.latest("page", held("the child's", done, []), FORKED_PATIENCE)
            os.write(write_end, repr(answer.value).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as said:
        told = said.read()
    os.waitpid(child, 0)
    assert told == repr("the child's"), f"the child's page was not computed in {FORKED_PATIENCE:.0f} s: {told}"
