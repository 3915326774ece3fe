"""Service Quotas on the emulator's endpoint: the SageMaker quotas a client can read before it creates a job.

The scenario's ``quotas`` (instance type -> instances; ``default_quota`` for the rest) are served as the
quotas ``"<type> for training job usage"`` and ``"<type> for processing job usage"`` of service
``sagemaker``, the names the create-time error message gives (R17/P12), through ``ListServiceQuotas``,
``GetServiceQuota`` and ``GetAWSDefaultServiceQuota``. Their quota codes are made up here (``L-`` and a
digest): AWS's real codes are not published in a form this project could ship, so clients must find a
quota by its name, as the preflight does.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from sm_prefs_devkit.emulator import paging, service_model
from sm_prefs_devkit.emulator.errors import ServiceError, UnknownOperationException, shorten

if TYPE_CHECKING:
    from sm_prefs_devkit.emulator.service import Backends

TARGET_PREFIX = "ServiceQuotasV20190624"
SERVICE = "service-quotas"
KNOWN = ("ListServiceQuotas", "GetServiceQuota", "GetAWSDefaultServiceQuota")
WRITES: tuple[str, ...] = ()  # read-only: nothing to save
USAGES = ("training", "processing")
DEFAULT_PAGE = 100


class NoSuchResourceException(ServiceError):
    code = "NoSuchResourceException"


class InvalidPaginationTokenException(ServiceError):
    code = "InvalidPaginationTokenException"


def quota_name(instance_type: str, usage: str) -> str:
    return f"{instance_type} for {usage} job usage"


def _code(name: str) -> str:
    return "L-" + hashlib.sha256(name.encode()).hexdigest()[:8].upper()


def _instance_types(usage: str) -> list[str]:
    shape = service_model.service_model().shape_for(f"{usage.capitalize()}InstanceType")
    return list(shape.enum)


def _quotas(scenario: Any, account_id: str, region: str) -> list[dict[str, Any]]:
    quotas = []
    for usage in USAGES:
        # A type the scenario gives no quota has the default one; with no default, no quota to read.
        types = set(scenario.quotas) | (set(_instance_types(usage)) if scenario.default_quota is not None else set())
        for instance_type in sorted(types):
            value = scenario.quota_for(instance_type)
            if value is None:
                continue
            name = quota_name(instance_type, usage)
            code = _code(name)
            quotas.append(
                {
                    "ServiceCode": "sagemaker",
                    "ServiceName": "Amazon SageMaker",
                    "QuotaArn": f"arn:aws:servicequotas:{region}:{account_id}:sagemaker/{code}",
                    "QuotaCode": code,
                    "QuotaName": name,
                    "Value": float(value),
                    "Unit": "None",
                    "Adjustable": True,
                    "GlobalQuota": False,
                    "QuotaAppliedAtLevel": "ACCOUNT",
                }
            )
    return quotas


def answer(backends: Backends, operation: str, request: dict[str, Any], region: str) -> dict[str, Any]:
    engine = backends.engine
    if operation not in KNOWN:
        raise UnknownOperationException(
            f"{TARGET_PREFIX}.{shorten(operation)} is not supported by the airflow-sm-prefs emulator; of Service "
            f"Quotas it implements {', '.join(KNOWN)}."
        )
    scenario = engine.scenario
    quotas = _quotas(scenario, scenario.account_id, region) if request.get("ServiceCode") == "sagemaker" else []
    if operation == "ListServiceQuotas":
        if request.get("ServiceCode") != "sagemaker":
            raise NoSuchResourceException(
                f"The request failed because the service {shorten(str(request.get('ServiceCode')))!r} is not known "
                "to the emulator (it serves sagemaker)."
            )
        if request.get("QuotaCode"):
            quotas = [quota for quota in quotas if quota["QuotaCode"] == request["QuotaCode"]]
        start = paging.offset(request.get("NextToken"), request, operation, InvalidPaginationTokenException)
        limit = int(request.get("MaxResults") or DEFAULT_PAGE)
        result: dict[str, Any] = {"Quotas": quotas[start : start + limit]}
        if start + limit < len(quotas):
            result["NextToken"] = paging.token(request, operation, start + limit)
        return result
    for quota in quotas:
        if quota["QuotaCode"] == request.get("QuotaCode"):
            return {"Quota": quota}
    raise NoSuchResourceException(
        f"The request failed because the specified quota {shorten(str(request.get('QuotaCode')))!r} does not exist."
    )
