"""A store that misbehaves on purpose: the emulator's S3 behind a small proxy on loopback whose fault a test sets
(and changes) while clients talk to it, as a real store or the network in front of it would misbehave.

Faults: ``None`` passes every byte through; ``"blackhole"`` accepts and never answers; ``"reset"`` accepts and
closes at once; ``403``, ``500``, ``503`` answer every request with S3's error for that status (AccessDenied,
InternalError, SlowDown); ``"truncate"`` forwards the request and cuts the answer's body in half.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Literal

Fault = Literal["blackhole", "reset", "truncate", 403, 500, 503] | None

S3_ERRORS = {
    403: ("Forbidden", "AccessDenied", "Access Denied"),
    500: ("Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    503: ("Slow Down", "SlowDown", "Please reduce your request rate."),
}


class FaultyStore:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.fault: Fault = None
        self.requests = 0  # requests that reached the proxy, whatever their fate
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        self._stopped = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
        for held in self._held:
            with contextlib.suppress(OSError):
                held.close()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        fault = self.fault
        self.requests += 1
        if fault == "blackhole":
            self._held.append(client)  # read nothing, answer nothing, until the test ends
            return
        # A client that gives up (its own deadline) or an upstream that stalls ends this exchange, not the proxy.
        with client, contextlib.suppress(OSError):
            if fault == "reset":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return
            if fault in S3_ERRORS:
                self._answer_error(client, S3_ERRORS[fault], int(fault))  # type: ignore[arg-type]
                return
            with socket.create_connection(self.upstream, timeout=30) as upstream:
                if fault == "truncate":
                    self._truncate(client, upstream)
                else:
                    self._pump(client, upstream)

    def _answer_error(self, client: socket.socket, error: tuple[str, str, str], status: int) -> None:
        request = _read_request(client)
        reason, code, message = error
        body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len(body)}\r\n"
        answer = head.encode() + b"Connection: close\r\n\r\n"
        client.sendall(answer if request.startswith(b"HEAD ") else answer + body)  # as S3: no body to a HEAD

    def _truncate(self, client: socket.socket, upstream: socket.socket) -> None:
        upstream.sendall(_read_request(client))
        head, body = _read_message(upstream)
        client.sendall(head + body[: len(body) // 2])

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        sockets = [client, upstream]
        # A pooled connection opened before a fault was set meets the fault too: it is closed, and the client's
        # next connection is served with the fault.
        while not self._stopped.is_set() and self.fault is None:
            readable, _, _ = select.select(sockets, [], [], 0.5)
            for source in readable:
                data = source.recv(65536)
                if not data:
                    return
                (upstream if source is client else client).sendall(data)


def _read_message(connection: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP message's head and its body (by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n", body


def _read_request(connection: socket.socket) -> bytes:
    head, body = _read_message(connection)
    return head + body
