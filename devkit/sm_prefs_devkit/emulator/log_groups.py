"""CloudWatch Logs groups no emulated job writes (Airflow's remote task logs, a team's own), served by moto.

The jobs' groups (``/aws/sagemaker/TrainingJobs``, ...) are computed from the jobs (``logs.py``). Any other
group is what a client creates and writes itself: Airflow's CloudWatch remote logging creates its group and
one stream per task try, puts events as the task logs, and reads them back when the UI asks. moto's CloudWatch
Logs backend answers those calls, per account and Region, on the emulator's endpoint; the groups are kept in
the state file (beside the S3 objects), so an emulator restart keeps the task logs written before it.

moto's backends are shared by the process's emulators, as for S3 (``moto_store``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sm_prefs_devkit.emulator.errors import ServiceError, shorten
from sm_prefs_devkit.emulator.moto_store import MotoStore

TARGET_PREFIX = "Logs_20140328"
# What writing and keeping a group takes (Airflow's handler: create the group and a stream, put events, and
# set a retention when one is configured); the reads are the same calls a job's group answers.
WRITES = (
    "CreateLogGroup",
    "CreateLogStream",
    "PutLogEvents",
    "PutRetentionPolicy",
    "DeleteLogGroup",
    "DeleteLogStream",
)


# PutLogEvents' batch limits, as its API reference states them: the size is the events' messages in UTF-8 plus
# 26 bytes an event (not the request's body, whose JSON adds quotes, escapes and timestamps).
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD_BYTES = 26


class InvalidParameterException(ServiceError):
    code = "InvalidParameterException"


def check_batch(request: Mapping[str, Any]) -> None:
    """A PutLogEvents batch within the documented limits; InvalidParameterException naming the one it breaks."""
    events = request.get("logEvents") or []
    if len(events) > MAX_BATCH_EVENTS:
        raise InvalidParameterException(f"Too many log events in the batch: {len(events)} exceeds {MAX_BATCH_EVENTS}")
    size = sum(len(str(event.get("message", "")).encode()) + EVENT_OVERHEAD_BYTES for event in events)
    if size > MAX_BATCH_BYTES:
        raise InvalidParameterException(f"Upload too large: {size} bytes exceeds limit of {MAX_BATCH_BYTES}")


class LogsUnavailable(RuntimeError):
    """moto is not installed: the emulator then serves only the jobs' own log groups."""


def _passed_on(code: str, message: str, status: int) -> ServiceError:
    """moto's error as the emulator answers it: a ServiceError of that code (the code is moto's, not typed here)."""
    error_class: type[ServiceError] = type(code, (ServiceError,), {"code": code, "status": status})
    return error_class(message)


def _backends() -> Any:
    try:
        from moto.logs.models import logs_backends
    except ImportError as error:
        raise LogsUnavailable("log groups of clients need moto: pip install 'moto[s3]'") from error
    return logs_backends


class LogGroupStore(MotoStore):
    """One account's log groups other than the jobs', as clients write and read them."""

    def __init__(self, account_id: str) -> None:
        _backends()  # LogsUnavailable now, rather than at the first request
        super().__init__()
        self.account_id = account_id

    def _backend(self, region: str) -> Any:
        return _backends()[self.account_id][region]

    def call(self, operation: str, request: dict[str, Any], region: str) -> dict[str, Any]:
        """One call on a group of the client's own, answered as CloudWatch Logs would."""
        if operation == "PutLogEvents":
            check_batch(request)
        from botocore.awsrequest import AWSPreparedRequest
        from botocore.compat import HTTPHeaders
        from moto.core.request import normalize_request

        url = f"https://logs.{region}.amazonaws.com/"
        headers = HTTPHeaders()
        headers["X-Amz-Target"] = f"{TARGET_PREFIX}.{operation}"
        headers["Content-Type"] = "application/x-amz-json-1.1"
        # moto reads the Region from the credential scope of the signature.
        headers["Authorization"] = f"AWS4-HMAC-SHA256 Credential=emulated/20260101/{region}/logs/aws4_request"
        prepared = AWSPreparedRequest(
            method="POST", url=url, headers=headers, body=json.dumps(request).encode(), stream_output=False
        )
        request_object = normalize_request(prepared)
        with self.lock:
            status, _, reply = _account_responder(self.account_id).dispatch(request_object, url, request_object.headers)
            if operation in WRITES and int(status) < 300:
                self.version += 1
        answer = json.loads(reply) if reply else {}
        if int(status) >= 300:
            raise _passed_on(
                str(answer.get("__type", "InternalFailure")), shorten(str(answer.get("message", "")), 400), int(status)
            )
        return dict(answer)

    def groups(self, region: str, prefix: str) -> list[dict[str, Any]]:
        """The groups of the Region whose names start with ``prefix``, as DescribeLogGroups lists them."""
        with self.lock:
            groups = self._backend(region).groups
            return [groups[name].to_describe_dict() for name in sorted(groups) if name.startswith(prefix)]

    # -- persistence ----------------------------------------------------------------------------------------

    def dump(self) -> dict[str, dict[str, dict[str, list[list[Any]]]]]:
        """Every Region's groups, their streams and events (timestamp, message), for the state file."""
        with self.lock:
            return {
                region: {
                    name: {
                        stream: [[event.timestamp, event.message] for event in log_stream.events]
                        for stream, log_stream in group.streams.items()
                    }
                    for name, group in backend.groups.items()
                }
                for region, backend in _backends()[self.account_id].items()
                if backend.groups
            }

    def restore(self, saved: Mapping[str, Mapping[str, Mapping[str, list[list[Any]]]]]) -> None:
        """Each saved group as it was saved (an emulator of this process may still hold it: it is replaced)."""
        with self.lock:
            for region, groups in saved.items():
                backend = self._backend(region)
                for name, streams in groups.items():
                    if name in backend.groups:
                        backend.delete_log_group(name)
                    backend.create_log_group(name, {})
                    group = backend.groups[name]
                    for stream, events in streams.items():
                        backend.create_log_stream(name, stream)
                        if events:
                            group.streams[stream].put_log_events(
                                [
                                    {"timestamp": int(timestamp), "message": str(message)}
                                    for timestamp, message in events
                                ]
                            )

    def _empty(self) -> None:
        for backend in _backends()[self.account_id].values():
            backend.reset()


def _account_responder(account_id: str) -> Any:
    """moto's CloudWatch Logs handler, answering for one account whatever access key signed the request."""
    from moto.logs.responses import LogsResponse

    class AccountLogsResponse(LogsResponse):  # type: ignore[misc]
        def get_current_account(self) -> str:
            return account_id

    return AccountLogsResponse
