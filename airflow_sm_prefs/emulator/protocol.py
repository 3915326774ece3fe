"""The wire: SageMaker's JSON 1.1 protocol over HTTP, and the control surface's plain JSON beside it.

AWS API: ``POST /`` with ``X-Amz-Target: SageMaker.<Operation>``; any credentials are accepted.
Control surface (tests and demos only, loopback clients only): ``/_emulator/...``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from airflow_sm_prefs.emulator import control
from airflow_sm_prefs.emulator.errors import (
    InternalFailure,
    SerializationException,
    ServiceError,
    UnknownOperationException,
)
from airflow_sm_prefs.emulator.scenario import ScenarioError
from airflow_sm_prefs.emulator.service import Emulator

log = logging.getLogger(__name__)

AWS_JSON = "application/x-amz-json-1.1"
PLAIN_JSON = "application/json"


class HasEmulator(Protocol):
    emulator: Emulator


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HasEmulator  # type: ignore[assignment]

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header is the service's clock, which is the virtual one (clients may rely on it).
        return super().date_time_string(self.server.emulator.engine.clock.now() if timestamp is None else timestamp)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("emulator: " + format, *args)

    def _reply(self, status: int, payload: Any, content_type: str = AWS_JSON) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", f"emulator-{time.monotonic_ns()}")
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError("request body must be a JSON object")
        return parsed

    def _is_loopback(self) -> bool:
        return ipaddress.ip_address(self.client_address[0]).is_loopback

    # -- control surface ----------------------------------------------------------------------------------

    def _control(self, method: str) -> None:
        if not self._is_loopback():
            self._reply(
                HTTPStatus.FORBIDDEN, {"error": "the control surface answers loopback clients only"}, PLAIN_JSON
            )
            return
        try:
            result = control.handle(self.server.emulator, method, self.path.split("?", 1)[0], self._body())
        except control.UnknownRoute as exc:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no control route {exc}"}, PLAIN_JSON)
            return
        except KeyError as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"missing field {exc}"}, PLAIN_JSON)
            return
        except (ValueError, TypeError, ScenarioError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)}, PLAIN_JSON)
            return
        self._reply(HTTPStatus.OK, result, PLAIN_JSON)

    # -- AWS API --------------------------------------------------------------------------------------------

    def _call(self) -> dict[str, Any]:
        target = self.headers.get("X-Amz-Target", "")
        prefix, _, operation = target.partition(".")
        try:
            request = self._body()
        except ValueError as exc:
            raise SerializationException("Request body is not a valid JSON object") from exc
        if prefix != "SageMaker" or not operation:
            raise UnknownOperationException(f"Missing or foreign X-Amz-Target {target!r}; expected SageMaker.<Op>")
        return self.server.emulator.call(operation, request)

    def do_GET(self) -> None:
        if self.path.startswith(control.CONTROL_PREFIX):
            self._control("GET")
        else:
            self._reply(HTTPStatus.NOT_FOUND, {"error": "the emulator serves the SageMaker API at POST /"}, PLAIN_JSON)

    def do_POST(self) -> None:
        if self.path.startswith(control.CONTROL_PREFIX):
            self._control("POST")
            return
        try:
            result = self._call()
        except ServiceError as error:
            self._reply(error.status, error.body())
            return
        except Exception as exc:  # a bug in the emulator must still answer like a service would
            log.exception("emulator: internal error")
            failure = InternalFailure(f"emulator internal error: {exc}")
            self._reply(failure.status, failure.body())
            return
        self._reply(HTTPStatus.OK, result)
