"""The wire: SageMaker's JSON 1.1 protocol over HTTP, S3 and the control surface's plain JSON beside it.

AWS JSON APIs: ``POST /`` with ``X-Amz-Target: SageMaker.<Operation>`` (or the target of CloudWatch Logs,
the Price List API or Service Quotas);
any credentials are accepted. CloudWatch's metrics (``instance_metrics``): AWS JSON 1.0 with ``X-Amz-Target:
GraniteServiceVersion20100801.<Op>`` (botocore 1.42+), or a form ``POST /`` with ``Action=<Op>`` (the query
protocol of older clients). S3: any other request (moto answers it, ``s3.py``).
Control surface (tests and demos only, loopback clients only): ``/_emulator/...``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from sm_prefs_devkit.emulator import control, instance_metrics, query_protocol, s3
from sm_prefs_devkit.emulator import logs as logs_api
from sm_prefs_devkit.emulator.errors import (
    InternalFailure,
    SerializationException,
    ServiceError,
    UnknownOperationException,
    shorten,
)
from sm_prefs_devkit.emulator.scenario import ScenarioError
from sm_prefs_devkit.emulator.service import SERVICES, Emulator

log = logging.getLogger(__name__)

AWS_JSON = "application/x-amz-json-1.1"
FORM = "application/x-www-form-urlencoded"
# CloudWatch's JSON protocol is version 1.0; every other service here speaks 1.1.
JSON_VERSIONS = {instance_metrics.TARGET_PREFIX: "application/x-amz-json-1.0"}
PLAIN_JSON = "application/json"
# Limits that make the emulator safe to leave listening: SageMaker's largest requests (100 hyperparameters,
# 100 environment variables) are far below these.
MAX_BODY_BYTES = 1024 * 1024
# A full PutLogEvents batch (1 MiB of messages by CloudWatch's own count) is a larger JSON body; the service's
# limit on the body itself is not documented (docs/emulator.md, E16).
LOGS_MAX_BODY_BYTES = 4 * MAX_BODY_BYTES
MAX_JSON_DEPTH = 32
REQUEST_TIMEOUT_SECONDS = 30.0
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
CHUNKED_REFUSED = "chunked request bodies are not supported; send Content-Length"
CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([a-z]{2}(?:-[a-z]+)+-\d)/")


class BodyRefused(Exception):
    """A request body the emulator will not read or parse; answered without touching any state."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BodyCutShort(Exception):
    """The client closed its connection before sending the body its ``Content-Length`` declared.

    S3 never stores such a PUT (it answers IncompleteBody, or the connection is simply gone); storing the part
    that arrived under the checksum the headers announced would hand a later reader a corrupt object."""


def _refuse_non_finite(constant: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError(f"{constant} is not a JSON number")


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Iteratively, so a deeply nested body cannot exhaust the stack of the code that reads it later."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


class HasEmulator(Protocol):
    emulator: Emulator
    request_timeout: float
    server_address: Any


def _is_loopback_address(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A reply is written as its headers, then its body: with Nagle's algorithm the body waits for the client's
    # delayed ACK of the headers, 40 ms on Linux, which was most of every GET and every SageMaker call.
    disable_nagle_algorithm = True
    server: HasEmulator  # type: ignore[assignment]

    def setup(self) -> None:
        # A socket timeout per connection: a client that sends half a request cannot hold a thread forever.
        super().setup()
        self.connection.settimeout(self.server.request_timeout)

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header is the service's clock, which is the virtual one (clients may rely on it).
        return super().date_time_string(self.server.emulator.engine.clock.now() if timestamp is None else timestamp)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("emulator: " + format, *args)

    def _reply(self, status: int, payload: Any, content_type: str = AWS_JSON, close: bool = False) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", f"emulator-{time.monotonic_ns()}")
        if close:
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _declared_body(self, limit: int, length_required: bool) -> bytes:
        """The body as ``Content-Length`` declares it; BodyRefused (and nothing read) when it breaks a limit."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise BodyRefused(HTTPStatus.LENGTH_REQUIRED, CHUNKED_REFUSED)
        declared = self.headers.get("Content-Length")
        if declared is None and length_required:
            raise BodyRefused(HTTPStatus.LENGTH_REQUIRED, f"a {self.command} needs a Content-Length header")
        declared = (declared or "0").strip()
        if not declared.isdigit():
            raise BodyRefused(HTTPStatus.BAD_REQUEST, "Content-Length must be a non-negative integer")
        length = int(declared)
        if length > limit:
            raise BodyRefused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body of {length} bytes exceeds {limit}")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise BodyCutShort(f"{len(body)} of {length} bytes arrived")
        return body

    def _body(self) -> dict[str, Any]:
        """The JSON object a POST carries; BodyRefused (and nothing read) when it breaks a limit."""
        if self.command != "POST":
            return {}
        logs = self.headers.get("X-Amz-Target", "").startswith(f"{logs_api.TARGET_PREFIX}.")
        raw = self._declared_body(LOGS_MAX_BODY_BYTES if logs else MAX_BODY_BYTES, length_required=True)
        if not raw:
            return {}
        try:
            parsed = json.loads(raw, parse_constant=_refuse_non_finite)
        except (ValueError, RecursionError) as error:
            raise BodyRefused(HTTPStatus.BAD_REQUEST, "request body is not valid JSON") from error
        if not isinstance(parsed, dict):
            raise BodyRefused(HTTPStatus.BAD_REQUEST, "request body must be a JSON object")
        if _depth_exceeds(parsed, MAX_JSON_DEPTH):
            raise BodyRefused(HTTPStatus.BAD_REQUEST, f"request body nests deeper than {MAX_JSON_DEPTH} levels")
        return parsed

    def _refuse(self, refusal: BodyRefused, payload: dict[str, Any], content_type: str) -> None:
        # What is left of the body was not read: close rather than read it as the next request.
        self._reply(refusal.status, payload, content_type, close=True)

    def _is_loopback(self) -> bool:
        return ipaddress.ip_address(self.client_address[0]).is_loopback

    # -- control surface ----------------------------------------------------------------------------------

    def _control_refusal(self, method: str) -> tuple[HTTPStatus, str] | None:
        """Why a control request is refused: not from this machine, or from a browser (a web page could
        otherwise steer the emulator through the user's browser, also by DNS rebinding)."""
        if not self._is_loopback():
            return HTTPStatus.FORBIDDEN, "the control surface answers loopback clients only"
        if "Origin" in self.headers:
            return HTTPStatus.FORBIDDEN, "the control surface refuses requests from web pages (an Origin header)"
        host = self.headers.get("Host", "")
        hostname = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
        if hostname not in LOOPBACK_HOSTS:
            return HTTPStatus.FORBIDDEN, "the control surface answers requests addressed to a loopback name only"
        if method == "POST" and self.headers.get_content_type() != PLAIN_JSON:
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "control requests must be application/json"
        return None

    def _control(self, method: str) -> None:
        refusal = self._control_refusal(method)
        if refusal is not None:
            self._refuse(BodyRefused(*refusal), {"error": refusal[1]}, PLAIN_JSON)
            return
        try:
            result = control.handle(self.server.emulator, method, self.path.split("?", 1)[0], self._body())
        except BodyRefused as refused:
            self._refuse(refused, {"error": refused.message}, PLAIN_JSON)
            return
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
        request = self._body()
        if prefix in SERVICES and operation:
            return self.server.emulator.call_service(SERVICES[prefix], operation, request, self._signed_region())
        if prefix != "SageMaker" or not operation:
            raise UnknownOperationException(
                f"Missing or foreign X-Amz-Target {shorten(target)!r}; expected SageMaker.<Op>"
            )
        return self.server.emulator.call(operation, request, self._signed_region())

    def _signed_region(self) -> str | None:
        """The Region in the request's SigV4 credential scope, as the real endpoint of that Region implies."""
        match = CREDENTIAL_SCOPE.search(self.headers.get("Authorization", ""))
        return match.group(1) if match else None

    # -- CloudWatch's metrics, in its two wire protocols -------------------------------------------------------

    def _metrics_query(self) -> None:
        """CloudWatch's query protocol (clients before botocore 1.42): a form in, XML out."""
        from urllib.parse import parse_qsl

        from sm_prefs_devkit.emulator import service_model

        request_id = f"emulator-{time.monotonic_ns()}"
        try:
            raw = self._declared_body(MAX_BODY_BYTES, length_required=True)
            form = dict(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
            operation = form.pop("Action", "")
            form.pop("Version", None)
            if operation not in instance_metrics.KNOWN:
                raise UnknownOperationException(f"CloudWatch {shorten(operation)!r} is not served by the emulator")
            model = service_model.operation(operation, instance_metrics.SERVICE)
            request = query_protocol.decode(form, model.input_shape) if model.input_shape is not None else {}
            answer = self.server.emulator.call_service(instance_metrics, operation, request, self._signed_region())
            status, body = (
                200,
                query_protocol.encode(instance_metrics.SERVICE, operation, answer, model.output_shape, request_id),
            )
        except (TimeoutError, BodyCutShort):
            self.close_connection = True
            return
        except (BodyRefused, ServiceError) as error:
            code = error.code if isinstance(error, ServiceError) else SerializationException.code
            status = error.status
            body = query_protocol.error(instance_metrics.SERVICE, code, error.message, request_id)
        except Exception as exc:  # a bug in the emulator must still answer like a service would
            log.exception("emulator: internal CloudWatch error")
            status = InternalFailure.status
            body = query_protocol.error(instance_metrics.SERVICE, InternalFailure.code, str(exc), request_id)
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", request_id)
        self.end_headers()
        self.wfile.write(body)

    # -- S3 -------------------------------------------------------------------------------------------------

    def _is_json_api(self) -> bool:
        return self.command == "POST" and "X-Amz-Target" in self.headers

    def _s3(self) -> None:
        try:
            body = self._s3_body()
        except (TimeoutError, BodyCutShort):
            self.close_connection = True  # a client that stopped sending gets no reply, only a closed connection
            return
        except BodyRefused as refused:
            self._refuse(refused, {"error": refused.message}, PLAIN_JSON)
            return
        headers = {name: value for name, value in self.headers.items()}
        try:
            status, reply_headers, reply = self.server.emulator.call_s3(self.command, self.path, headers, body)
        except ValueError as error:  # a parameter moto cannot read (max-keys=abc): the caller's fault
            status, reply_headers = 400, {"Content-Type": "application/xml"}
            message = shorten(str(error)).replace("&", "&amp;").replace("<", "&lt;")
            reply = f"<Error><Code>InvalidArgument</Code><Message>{message}</Message></Error>".encode()
        except Exception:  # a bug in moto or here must still answer as S3 would
            log.exception("emulator: internal S3 error")
            status, reply_headers = 500, {"Content-Type": "application/xml"}
            reply = b"<Error><Code>InternalError</Code><Message>emulator internal error</Message></Error>"
        self.send_response(status)
        for name, value in reply_headers.items():
            if name.lower() not in ("content-length", "server", "date", "connection", "transfer-encoding"):
                self.send_header(name, value)
        # A HEAD reply announces the length of the body a GET would have, and sends none.
        declared = reply_headers.get("Content-Length") or reply_headers.get("content-length")
        self.send_header("Content-Length", declared if self.command == "HEAD" and declared else str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    def _s3_body(self) -> bytes:
        if self.command in ("GET", "HEAD"):
            return b""
        return self._declared_body(s3.MAX_OBJECT_BYTES, length_required=False)

    # -- who may call ----------------------------------------------------------------------------------------

    def parse_request(self) -> bool:
        """HTTP/0.9 (a request line without a version, so no headers) is refused at once: AWS clients speak
        HTTP/1.1, and a 0.9 request would otherwise be served without any of the checks below."""
        line = getattr(self, "raw_requestline", b"").decode("iso-8859-1", "replace")
        words = line.split()
        if len(words) < 3:  # judged before the standard parser, which would wait for headers 0.9 never sends
            self.close_connection = True
            self.request_version = "HTTP/1.1"  # so the refusal has a status line and headers
            self.requestline = line.rstrip("\r\n")
            self.command, self.path = [*words, "", ""][:2]
            self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/1.0 or 1.1 only")
            return False
        return super().parse_request()

    def _api_refusal(self) -> tuple[HTTPStatus, str] | None:
        """Why an AWS API or S3 request is refused: it comes from a web page (an Origin header: a page on
        any site could otherwise create jobs and objects through the user's browser), it names a host this
        emulator is not (DNS rebinding), or it writes to S3 without a signature."""
        if "Origin" in self.headers:
            return HTTPStatus.FORBIDDEN, "the emulator refuses requests from web pages (an Origin header)"
        bound = str(self.server.server_address[0]) if hasattr(self.server, "server_address") else "127.0.0.1"
        if ipaddress.ip_address(bound).is_loopback:
            host = self.headers.get("Host", "")
            hostname = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
            local = hostname in LOOPBACK_HOSTS or hostname.endswith(".localhost") or _is_loopback_address(hostname)
            if not local:
                return HTTPStatus.FORBIDDEN, "requests must be addressed to a loopback name (DNS rebinding refused)"
        expected = JSON_VERSIONS.get(self.headers.get("X-Amz-Target", "").partition(".")[0], AWS_JSON)
        if self._is_json_api() and self.headers.get_content_type() != expected:
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"AWS JSON requests are {expected}"
        if not self._is_json_api() and self.command in ("PUT", "POST", "DELETE") and not self._signed():
            return HTTPStatus.FORBIDDEN, "S3 writes must be signed (an Authorization header or a presigned URL)"
        return None

    def _signed(self) -> bool:
        query = self.path.partition("?")[2]
        return "Authorization" in self.headers or "X-Amz-Signature=" in query or "Signature=" in query

    def _api(self, serve: Any) -> None:
        refusal = self._api_refusal()
        if refusal is not None:
            self._refuse(BodyRefused(*refusal), {"__type": "AccessDeniedException", "message": refusal[1]}, AWS_JSON)
            return
        serve()

    def do_GET(self) -> None:
        if self.path.startswith(control.CONTROL_PREFIX):
            self._control("GET")
        else:
            self._api(self._s3)

    def do_HEAD(self) -> None:
        self._api(self._s3)

    def do_PUT(self) -> None:
        self._api(self._s3)

    def do_DELETE(self) -> None:
        self._api(self._s3)

    def do_POST(self) -> None:
        if self.path.startswith(control.CONTROL_PREFIX):
            self._control("POST")
            return
        self._api(self._post)

    def _post(self) -> None:
        if not self._is_json_api() and self.headers.get_content_type() == FORM:
            self._metrics_query()
            return
        if not self._is_json_api():
            self._s3()
            return
        try:
            result = self._call()
        except (TimeoutError, BodyCutShort):
            self.close_connection = True  # a client that stopped sending gets no reply, only a closed connection
            return
        except BodyRefused as refused:
            code = (
                SerializationException.code
                if refused.status == HTTPStatus.BAD_REQUEST
                else refused.status.phrase.replace(" ", "")
            )
            self._refuse(refused, {"__type": code, "message": refused.message}, AWS_JSON)
            return
        except ServiceError as error:
            self._reply(error.status, error.body())
            return
        except Exception as exc:  # a bug in the emulator must still answer like a service would
            log.exception("emulator: internal error")
            failure = InternalFailure(f"emulator internal error: {exc}")
            self._reply(failure.status, failure.body())
            return
        self._reply(HTTPStatus.OK, result)
