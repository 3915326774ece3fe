"""HTTP front of the emulator: the SageMaker JSON 1.1 protocol, plus a separate control surface.

AWS API: ``POST /`` with ``X-Amz-Target: SageMaker.<Operation>``; any credentials are accepted.
Control surface (tests and demos only, loopback clients only): ``/_emulator/...``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import random
import tempfile
import threading
import time
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from airflow_sm_prefs.emulator import scenario as scenario_module
from airflow_sm_prefs.emulator.engine import PROCESSING, TRAINING, Engine
from airflow_sm_prefs.emulator.scenario import Scenario
from airflow_sm_prefs.emulator.service_rules import ServiceError

log = logging.getLogger(__name__)

OPERATIONS = {
    "CreateTrainingJob": ("create", TRAINING),
    "DescribeTrainingJob": ("describe", TRAINING),
    "StopTrainingJob": ("stop", TRAINING),
    "ListTrainingJobs": ("list", TRAINING),
    "CreateProcessingJob": ("create", PROCESSING),
    "DescribeProcessingJob": ("describe", PROCESSING),
    "StopProcessingJob": ("stop", PROCESSING),
    "ListProcessingJobs": ("list", PROCESSING),
}
CONTROL_PREFIX = "/_emulator/"


class Emulator:
    """The service: an engine, its fault settings, and optional persistence to a state file."""

    def __init__(self, scenario: Scenario, state_file: Path | None = None) -> None:
        self.state_file = state_file
        self.random = random.Random(scenario.seed)
        self.faults = scenario.faults
        self.engine = self._load(scenario)
        self._saved_version = -1

    def _load(self, scenario: Scenario) -> Engine:
        if self.state_file is not None and self.state_file.exists():
            state = json.loads(self.state_file.read_text())
            log.info("emulator: resumed %d job(s) from %s", len(state["jobs"]), self.state_file)
            return Engine.from_state(scenario, state)
        return Engine(scenario)

    def reset(self, scenario: Scenario | None = None) -> None:
        scenario = scenario or self.engine.scenario
        with self.engine.lock:
            self.engine = Engine(scenario)
            self.faults = scenario.faults
            self.random = random.Random(scenario.seed)
            self.save(force=True)

    def save(self, force: bool = False) -> None:
        if self.state_file is None:
            return
        with self.engine.lock:
            if not force and self.engine.version == self._saved_version:
                return
            state = self.engine.to_state()
            self._saved_version = self.engine.version
        # Write-then-rename so a crash never leaves a half-written state file behind.
        handle, temporary = tempfile.mkstemp(dir=self.state_file.parent, prefix=".emulator-state-")
        with os.fdopen(handle, "w") as stream:
            json.dump(state, stream)
        os.replace(temporary, self.state_file)

    def call(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        self.engine.calls[operation] += 1
        if operation not in OPERATIONS:
            raise ServiceError(
                "UnsupportedOperation",
                f"SageMaker.{operation} is not supported by the airflow-sm-prefs emulator; it implements "
                f"{', '.join(sorted(OPERATIONS))}.",
            )
        self._inject_faults(operation)
        action, kind = OPERATIONS[operation]
        name_key = "TrainingJobName" if kind == TRAINING else "ProcessingJobName"
        if action == "create":
            result = self.engine.create(kind, request)
        elif action in ("describe", "stop"):
            name = request.get(name_key)
            if not isinstance(name, str):
                raise ServiceError("ValidationException", f"'{name_key}' is required but was not provided")
            if action == "describe":
                result = self.engine.describe(kind, name)
            else:
                self.engine.stop(kind, name)
                result = {}
        else:
            result = self.engine.list_jobs(kind, request)
        self.save()
        if self.faults.lost_reply_rate and self.random.random() < self.faults.lost_reply_rate:
            raise ServiceError("InternalFailure", "We encountered an internal error. Please try again.", 500)
        return result

    def _inject_faults(self, operation: str) -> None:
        faults = self.faults
        if operation in faults.deny:
            raise ServiceError(
                "AccessDeniedException",
                f"User: arn:aws:sts::{self.engine.scenario.account_id}:assumed-role/emulated is not authorized to "
                f"perform: sagemaker:{operation} because no identity-based policy allows the sagemaker:{operation} "
                "action",
            )
        delay = faults.latency_ms + faults.slow_operations.get(operation, 0.0)
        if delay:
            time.sleep(delay / 1000.0)
        draw = self.random.random()
        if draw < faults.throttle_rate:
            raise ServiceError("ThrottlingException", "Rate exceeded")
        if draw < faults.throttle_rate + faults.error_rate:
            raise ServiceError("InternalFailure", "We encountered an internal error. Please try again.", 500)

    # -- control surface ----------------------------------------------------------------------------------

    def control(self, method: str, path: str, body: dict[str, Any]) -> Any:
        route = path[len(CONTROL_PREFIX) :].strip("/")
        engine = self.engine
        if method == "GET" and route == "health":
            return {"ok": True, "virtual_time": engine.clock.now(), "scenario": engine.scenario.name}
        if method == "GET" and route == "jobs":
            return {"jobs": engine.snapshot()}
        if method == "GET" and route == "calls":
            return {"calls": dict(engine.calls)}
        if method == "GET" and route == "capacity":
            with engine.lock:
                engine.advance()
                types = set(engine.scenario.capacity) | set(engine.capacity_override) | set(engine.held)
                return {t: {"capacity": engine.capacity(t), "free": engine.free(t)} for t in sorted(types)}
        if method == "POST" and route == "reset":
            scenario = scenario_module.load(body["scenario"]) if body.get("scenario") else None
            self.reset(scenario)
            return {"ok": True}
        if method == "POST" and route == "capacity":
            engine.set_capacity({str(k): int(v) for k, v in body.items()})
            self.save()
            return {"ok": True}
        if method == "POST" and route == "advance":
            with engine.lock:
                engine.clock.advance(float(body["seconds"]))
                engine.advance()
            self.save()
            return {"ok": True, "virtual_time": engine.clock.now()}
        if method == "POST" and route == "faults":
            self.faults = scenario_module.parse_faults(body, "POST /_emulator/faults")
            return {"ok": True, "faults": asdict(self.faults)}
        raise KeyError(route)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header is the service's clock, which is the virtual one (clients may rely on it).
        return super().date_time_string(self.server.emulator.engine.clock.now() if timestamp is None else timestamp)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("emulator: " + format, *args)

    def _reply(self, status: int, payload: Any, content_type: str = "application/x-amz-json-1.1") -> None:
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

    def _control(self, method: str) -> None:
        if not self._is_loopback():
            self._reply(
                HTTPStatus.FORBIDDEN,
                {"error": "the control surface answers loopback clients only"},
                "application/json",
            )
            return
        try:
            result = self.server.emulator.control(method, self.path.split("?", 1)[0], self._body())
        except KeyError as exc:
            self._reply(HTTPStatus.NOT_FOUND, {"error": f"no control route {exc}"}, "application/json")
            return
        except (ValueError, TypeError, scenario_module.ScenarioError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)}, "application/json")
            return
        self._reply(HTTPStatus.OK, result, "application/json")

    def do_GET(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._control("GET")
        else:
            self._reply(
                HTTPStatus.NOT_FOUND,
                {"error": "the emulator serves the SageMaker API at POST /"},
                "application/json",
            )

    def do_POST(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._control("POST")
            return
        target = self.headers.get("X-Amz-Target", "")
        prefix, _, operation = target.partition(".")
        try:
            request = self._body()
        except ValueError:
            self._reply(400, {"__type": "SerializationException", "message": "Request body is not valid JSON"})
            return
        if prefix != "SageMaker" or not operation:
            self._reply(
                400,
                {
                    "__type": "UnknownOperationException",
                    "message": f"Missing or foreign X-Amz-Target {target!r}; expected SageMaker.<Op>",
                },
            )
            return
        try:
            result = self.server.emulator.call(operation, request)
        except ServiceError as error:
            self._reply(error.status, {"__type": error.code, "message": error.message})
            return
        except Exception as exc:  # a bug in the emulator must still answer like a service would
            log.exception("emulator: internal error in %s", operation)
            self._reply(500, {"__type": "InternalFailure", "message": f"emulator internal error: {exc}"})
            return
        self._reply(200, result)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], emulator: Emulator) -> None:
        self.emulator = emulator
        super().__init__(address, _Handler)


class EmulatorServer:
    """An emulator bound to a port; ``start()`` serves from a background thread (used by tests)."""

    def __init__(
        self, scenario: Scenario, host: str = "127.0.0.1", port: int = 0, state_file: Path | None = None
    ) -> None:
        self.emulator = Emulator(scenario, state_file)
        self._server = _Server((host, port), self.emulator)
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
        self.emulator.save(force=True)

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
