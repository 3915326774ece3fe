"""Every SageMaker call this provider makes, sync and async, and what its errors mean.

Built on the amazon provider's ``AwsBaseHook`` (connections, ``endpoint_url``, role assumption, ``verify``,
botocore config), so a connection that works for the provider's own operators works here.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

from airflow_sm_prefs.platform import supervisor_calls
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError
from airflow_sm_prefs.sagemaker.botocore_model import extend_provider_loader
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.job_view import jsonable

extend_provider_loader()

STOP_TIMEOUT_SECONDS = 20.0
DEFAULT_CONNECTION = "aws_default"  # the amazon provider's, and the operators' default

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "SlowDown",
    }
)
TRANSIENT_CODES = frozenset(
    {
        "InternalFailure",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
    }
)
ACCESS_DENIED_CODES = frozenset({"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"})


class ErrorClass(StrEnum):
    THROTTLED = "throttled"  # retry later, and slow down
    TRANSIENT = "transient"  # retry later
    NOT_FOUND = "not_found"  # SageMaker answers ValidationException (Describe) or ResourceNotFound (Stop)
    ACCESS_DENIED = "access_denied"
    OTHER = "other"


def error_code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    return str((response or {}).get("Error", {}).get("Code", "")) if isinstance(response, Mapping) else ""


def classify(error: BaseException) -> ErrorClass:
    """What an exception raised by a botocore or aiobotocore call means for the caller."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(error, ClientError):
        code = error_code(error)
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if code in THROTTLING_CODES:
            return ErrorClass.THROTTLED
        if code in TRANSIENT_CODES or status >= 500:
            return ErrorClass.TRANSIENT
        if code in ("ValidationException", "ResourceNotFound"):
            return ErrorClass.NOT_FOUND
        if code in ACCESS_DENIED_CODES:
            return ErrorClass.ACCESS_DENIED
        return ErrorClass.OTHER
    if isinstance(error, ConnectionError | HTTPClientError | asyncio.TimeoutError | OSError):
        return ErrorClass.TRANSIENT
    return ErrorClass.OTHER


def is_transient(error: BaseException) -> bool:
    return classify(error) in (ErrorClass.THROTTLED, ErrorClass.TRANSIENT)


def already_ended(error: BaseException) -> bool:
    """SageMaker answers a stop of a job that has ended with a ValidationException."""
    return error_code(error) == "ValidationException"


class SageMakerPreferenceHook(AwsBaseHook):
    """SageMaker for one connection and Region: ``conn`` is a boto3 client, ``get_async_conn()`` aiobotocore's.

    :param verify: whether to verify TLS certificates, or a CA bundle path (as the amazon provider's hooks).
    :param config: a ``botocore.config.Config`` (or its keyword dict) for every client, sync and async.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(*args, **kwargs)

    def connection_problem(self) -> str | None:
        """Why no SageMaker call can be made through this hook, in one line, or None. Asked before the first
        call: botocore's ``NoRegionError`` is a setting to correct, which no retry changes."""
        from botocore.exceptions import NoRegionError

        try:
            self.conn_region_name  # noqa: B018 (builds the client, which needs a Region)
        except NoRegionError:
            if self.aws_conn_id and not self.conn_config:  # the amazon provider went on without the connection
                close = difflib.get_close_matches(self.aws_conn_id, [DEFAULT_CONNECTION], n=1)
                meant = f" (did you mean {close[0]!r}?)" if close and close[0] != self.aws_conn_id else ""
                return (
                    f"the AWS connection {self.aws_conn_id!r} does not exist{meant}, and this host names no Region "
                    "for its own credentials; create the connection or correct aws_conn_id (`airflow-sm-prefs "
                    f"doctor --aws-conn-id {self.aws_conn_id}` checks a host)"
                )
            return (
                f"the AWS connection {self.aws_conn_id!r} names no Region; set region_name in its extra, or the "
                "operator's region_name"
            )
        return None

    # -- sync ---------------------------------------------------------------------------------------------

    def create_job(self, kind: JobKind, request: Mapping[str, Any]) -> None:
        getattr(self.conn, kind.create_method)(**request)

    def describe_job(self, kind: JobKind, job_name: str) -> dict[str, Any]:
        response = getattr(self.conn, kind.describe_method)(**{kind.name_field: job_name})
        return dict(jsonable(response))

    def describe_job_at(self, kind: JobKind, job_name: str) -> tuple[dict[str, Any], float | None]:
        """The job's description and the service's clock when it answered (its Date header), if given."""
        response = getattr(self.conn, kind.describe_method)(**{kind.name_field: job_name})
        return dict(jsonable(response)), service_time(response)

    def describe_job_or_none(self, kind: JobKind, job_name: str) -> dict[str, Any] | None:
        """The job's description, or None when SageMaker has no such job."""
        from botocore.exceptions import ClientError

        try:
            return self.describe_job(kind, job_name)
        except ClientError as error:
            if classify(error) is ErrorClass.NOT_FOUND:
                return None
            raise

    def job_names_containing(self, kind: JobKind, text: str) -> list[str]:
        """Every job of ``kind`` whose name contains ``text``, all pages."""
        pages = self.conn.get_paginator(kind.list_method).paginate(NameContains=text)
        return [summary[kind.name_field] for page in pages for summary in page.get(kind.summaries_field, [])]

    def job_tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        for page in self.conn.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({tag["Key"]: tag["Value"] for tag in page.get("Tags", [])})
        return tags

    def tag_job(self, kind: JobKind, job_name: str, tags: Mapping[str, str]) -> None:
        """Add ``tags`` to the job (its ARN from a Describe); raises what SageMaker answers."""
        arn = self.describe_job(kind, job_name)[kind.arn_field]
        self.conn.add_tags(ResourceArn=arn, Tags=[{"Key": key, "Value": value} for key, value in tags.items()])

    def stop_job(self, kind: JobKind, job_name: str, log: logging.Logger | Any) -> None:
        """Best effort: a job that cannot be stopped is logged, never raised, since the caller gives up on it."""
        try:
            getattr(self.conn, kind.stop_method)(**{kind.name_field: job_name})
        except Exception as error:
            _log_stop(kind, job_name, error, log)
        else:
            _log_stop(kind, job_name, None, log)

    def check_instance_types(self, kind: JobKind, request: Mapping[str, Any]) -> None:
        """R19 against the model of the botocore actually in use (too heavy to load at DAG parse time)."""
        model = self.conn.meta.service_model
        resources_shape = model.shape_for(kind.resources_shape)
        if "InstancePreferences" not in resources_shape.members:
            raise RequestValidationError(
                ["the installed botocore does not know InstancePreferences; upgrade boto3/botocore to 1.43.90 or later"]
            )
        known = set(getattr(model.shape_for(kind.instance_type_shape), "enum", []))
        problems = [
            f"preference #{index + 1} ({entry.get('InstanceType')}): not a SageMaker {kind.name} instance type [R19]"
            for index, entry in enumerate(kind.resources(request).get("InstancePreferences") or [])
            if entry.get("InstanceType") not in known
        ]
        if problems:
            raise RequestValidationError(problems)

    # -- async (the triggerer) ----------------------------------------------------------------------------

    @staticmethod
    async def describe_job_async(client: Any, kind: JobKind, job_name: str) -> dict[str, Any]:
        return dict(await getattr(client, kind.describe_method)(**{kind.name_field: job_name}))

    @staticmethod
    async def list_jobs_async(client: Any, kind: JobKind, **filters: Any) -> dict[str, Any]:
        return dict(await getattr(client, kind.list_method)(**filters))

    async def stop_job_async(self, kind: JobKind, job_name: str, log: logging.Logger | Any) -> None:
        """``stop_job`` from an event loop, bounded so a trigger's ``on_kill`` never hangs."""
        try:
            async with await async_client(self) as client:
                await asyncio.wait_for(
                    getattr(client, kind.stop_method)(**{kind.name_field: job_name}), timeout=STOP_TIMEOUT_SECONDS
                )
        except Exception as error:
            _log_stop(kind, job_name, error, log)
        else:
            _log_stop(kind, job_name, None, log)


# How long a triggerer reuses one hook (and the connection it read) for the same settings: a rotated secret is
# picked up within this time.
SHARED_HOOK_SECONDS = 300.0
_shared_hooks: dict[str, tuple[float, SageMakerPreferenceHook]] = {}


def shared_hook(connection: Connection) -> SageMakerPreferenceHook:
    """One hook per connection settings in this process, renewed every :data:`SHARED_HOOK_SECONDS`.

    Each new hook reads its Airflow connection, which in a triggerer is a request to the supervisor: triggers
    stopping or watching jobs on the same connection share one hook instead of each asking again."""
    import time

    key = connection.key
    now = time.monotonic()
    found = _shared_hooks.get(key)
    if found is None or now - found[0] > SHARED_HOOK_SECONDS:
        found = _shared_hooks[key] = (now, SageMakerPreferenceHook(**connection.hook_arguments()))
    return found[1]


async def async_client(hook: Any) -> Any:
    """``hook.get_async_conn()`` from a trigger. The first call reads the hook's Airflow connection, a request
    to the supervisor that the provider makes through plain ``sync_to_async``: it is made beforehand through
    :func:`supervisor_calls.ask`, so a trigger cancelled meanwhile cannot break the triggerer's channel (the
    connection is then cached on the hook)."""
    await supervisor_calls.ask(lambda: hook.conn_config)
    return await hook.get_async_conn()


def service_time(response: Mapping[str, Any]) -> float | None:
    """The service's clock when it answered (the HTTP Date header), if present and parseable."""
    import email.utils

    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return email.utils.parsedate_to_datetime(date).timestamp() if date else None
    except (TypeError, ValueError):
        return None


def _log_stop(kind: JobKind, job_name: str, error: BaseException | None, log: logging.Logger | Any) -> None:
    if error is None:
        log.info("Requested stop of SageMaker %s job %s", kind.name, job_name)
    elif already_ended(error):
        log.info("SageMaker %s job %s had already ended; nothing to stop", kind.name, job_name)
    else:
        log.warning("Could not stop SageMaker %s job %s: %s", kind.name, job_name, error)
