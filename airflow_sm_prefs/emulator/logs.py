"""CloudWatch Logs, as far as the emulator's jobs write any: none yet, so every log group is absent.

Clients that follow a job's logs (the amazon provider's ``SageMakerHook`` with ``print_log=True``, the
SageMaker SDK) ask for the job's log streams; they expect AWS's answer for a log group that does not exist,
``ResourceNotFoundException``, which they are written to tolerate, rather than an unknown operation. Jobs
writing log lines is #16's work; this is the service's truthful answer until then.
"""

from __future__ import annotations

from typing import Any

from airflow_sm_prefs.emulator import service_model
from airflow_sm_prefs.emulator.errors import (
    ServiceError,
    UnknownOperationException,
    ValidationException,
    shorten,
)

TARGET_PREFIX = "Logs_20140328"
SERVICE = "logs"
# Operations that name a log group or stream: none exists, so each answers ResourceNotFoundException.
NAMING_A_GROUP = ("DescribeLogStreams", "GetLogEvents", "FilterLogEvents")
KNOWN = ("DescribeLogGroups", *NAMING_A_GROUP)


class ResourceNotFoundException(ServiceError):
    code = "ResourceNotFoundException"


def call(operation: str, request: dict[str, Any]) -> dict[str, Any]:
    if operation == "DescribeLogGroups":
        _check(operation, request)
        return {"logGroups": []}
    if operation in NAMING_A_GROUP:
        _check(operation, request)
        raise ResourceNotFoundException("The specified log group does not exist.")
    raise UnknownOperationException(
        f"{TARGET_PREFIX}.{shorten(operation)} is not supported by the airflow-sm-prefs emulator; of CloudWatch "
        f"Logs it implements DescribeLogGroups, {', '.join(NAMING_A_GROUP)}."
    )


def _check(operation: str, request: dict[str, Any]) -> None:
    problems = service_model.request_violations(operation, request, SERVICE)
    if problems:
        raise ValidationException("; ".join(problems))
