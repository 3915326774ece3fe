"""An emulator bound to a port: the threaded HTTP server that serves ``protocol.RequestHandler``."""

from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

from sm_prefs_devkit.emulator.engine import Engine
from sm_prefs_devkit.emulator.protocol import REQUEST_TIMEOUT_SECONDS, RequestHandler
from sm_prefs_devkit.emulator.scenario import Scenario
from sm_prefs_devkit.emulator.service import Emulator


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], emulator: Emulator, request_timeout: float) -> None:
        self.emulator = emulator
        self.request_timeout = request_timeout
        super().__init__(address, RequestHandler)

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """A client that hangs up between requests is no error of the emulator's (a proxy, a pool's closed
        connection): only its own failures get the traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class EmulatorServer:
    """``start()`` serves from a background thread (tests); ``serve_forever()`` from the caller's (the CLI)."""

    def __init__(
        self,
        scenario: Scenario,
        host: str = "127.0.0.1",
        port: int = 0,
        state_file: Path | None = None,
        scenario_source: str | None = None,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self.emulator = Emulator(scenario, state_file, scenario_source)
        self._server = _Server((host, port), self.emulator, request_timeout)
        self._thread: threading.Thread | None = None
        self._serving = False

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        host = self._server.server_address[0]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{self.port}"

    @property
    def engine(self) -> Engine:
        return self.emulator.engine

    def start(self) -> EmulatorServer:
        self._serving = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="sm-emulator", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._serving = True
        self._server.serve_forever()

    def stop(self) -> None:
        # shutdown() waits for a serve_forever loop, so it would block forever on a server never started.
        if self._serving:
            self._server.shutdown()
            self._serving = False
        self._server.server_close()
        self.emulator.close()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
