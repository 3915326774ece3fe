"""The test stacks' REST client: a slow answer to a read is asked again, a slow answer to a change is not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sm_prefs_devkit import local_stack
from sm_prefs_devkit.local_stack import LocalStack


class _SlowFirstAnswer(BaseHTTPRequestHandler):
    """Keeps the first request of each method past the client's deadline, answers the next at once."""

    seen: list[str] = []
    release = threading.Event()

    def _answer(self) -> None:
        first = self.command not in self.seen
        self.seen.append(self.command)
        if first:
            self.release.wait(10)
        body = b'{"answered": %d}' % len(self.seen)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stack(tmp_path, monkeypatch) -> Iterator[LocalStack]:
    monkeypatch.setattr(local_stack, "API_CALL_SECONDS", 0.3)
    _SlowFirstAnswer.seen = []
    _SlowFirstAnswer.release = threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowFirstAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield LocalStack(project_dir=tmp_path, workdir=tmp_path, api_port=server.server_address[1], emulator_port=1)
    _SlowFirstAnswer.release.set()
    server.shutdown()


def test_a_read_whose_answer_is_late_is_asked_again(stack):
    assert stack.request("GET", "/api/v2/version", auth=False) == {"answered": 2}
    assert _SlowFirstAnswer.seen == ["GET", "GET"]


def test_a_change_whose_answer_is_late_is_not_sent_twice(stack):
    with pytest.raises(TimeoutError):
        stack.request("POST", "/api/v2/dags/d/dagRuns", {}, auth=False)
    assert _SlowFirstAnswer.seen == ["POST"]
