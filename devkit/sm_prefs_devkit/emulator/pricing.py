"""The AWS Price List Query API on the emulator's endpoint: ``GetProducts`` for SageMaker's instances.

Serves the scenario's ``prices`` (Region -> kind -> instance type -> USD per hour) as products of service
``AmazonSageMaker``, family ``ML Instance``, in the shape the real API gives (each price list item a JSON
string with ``product``, ``terms.OnDemand`` and ``publicationDate``), with the filters a client narrows
them by and the service's pagination. A scenario's prices are its own; they are not AWS's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import TYPE_CHECKING, Any

from sm_prefs_devkit.emulator import paging
from sm_prefs_devkit.emulator.errors import ServiceError, UnknownOperationException, shorten

if TYPE_CHECKING:
    from sm_prefs_devkit.emulator.service import Backends

TARGET_PREFIX = "AWSPriceListService"
SERVICE = "pricing"
KNOWN = ("GetProducts",)
WRITES: tuple[str, ...] = ()  # read-only: nothing to save
SERVICE_CODE = "AmazonSageMaker"
PURPOSE = {"training": ("Training", "Train"), "processing": ("Processing", "Processing")}
DEFAULT_PAGE = 100


class InvalidParameterException(ServiceError):
    code = "InvalidParameterException"


class NotFoundException(ServiceError):
    code = "NotFoundException"


def _products(scenario: Any, publication: str) -> list[dict[str, Any]]:
    items = []
    for region, by_kind in sorted(scenario.prices.items()):
        for kind, by_type in sorted(by_kind.items()):
            purpose, usage = PURPOSE[kind]
            for instance_type, price in sorted(by_type.items()):
                usage_type = f"{region.upper()}-{usage}:{instance_type}"
                sku = hashlib.sha256(usage_type.encode()).hexdigest()[:16].upper()
                items.append(
                    {
                        "product": {
                            "productFamily": "ML Instance",
                            "sku": sku,
                            "attributes": {
                                "servicecode": SERVICE_CODE,
                                "regionCode": region,
                                "locationType": "AWS Region",
                                "productFamily": "ML Instance",
                                "platoinstancetype": purpose,
                                "instanceName": instance_type,
                                "usagetype": usage_type,
                                "operation": "RunInstance",
                            },
                        },
                        "serviceCode": SERVICE_CODE,
                        "terms": {
                            "OnDemand": {
                                f"{sku}.JRTCKXETXF": {
                                    "sku": sku,
                                    "offerTermCode": "JRTCKXETXF",
                                    "effectiveDate": publication,
                                    "priceDimensions": {
                                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                            "unit": "Hrs",
                                            "description": f"${price} per {purpose} {instance_type} hour",
                                            "pricePerUnit": {"USD": f"{price:.10g}"},
                                        }
                                    },
                                }
                            }
                        },
                        "version": "emulated",
                        "publicationDate": publication,
                    }
                )
    return items


def _matches(item: dict[str, Any], filters: list[dict[str, str]]) -> bool:
    attributes = {**item["product"]["attributes"], "sku": item["product"]["sku"]}
    for rule in filters:
        value = attributes.get(rule["Field"])
        wanted = rule["Value"]
        if rule["Type"] in ("TERM_MATCH", "EQUALS") and value != wanted:
            return False
        if rule["Type"] == "CONTAINS" and (value is None or wanted not in value):
            return False
        if rule["Type"] in ("ANY_OF", "NONE_OF"):
            choices = [choice.strip() for choice in wanted.split(",")]
            if (value in choices) != (rule["Type"] == "ANY_OF"):
                return False
    return True


def answer(backends: Backends, operation: str, request: dict[str, Any], region: str) -> dict[str, Any]:
    engine = backends.engine
    del region  # the Price List API answers for every Region from the few it is served in
    if operation not in KNOWN:
        raise UnknownOperationException(
            f"{TARGET_PREFIX}.{shorten(operation)} is not supported by the airflow-sm-prefs emulator; of the Price "
            f"List Query API it implements {', '.join(KNOWN)}."
        )
    if request.get("ServiceCode") != SERVICE_CODE:
        raise NotFoundException(
            f"The emulator prices service {SERVICE_CODE} only, not {shorten(str(request.get('ServiceCode')))!r}"
        )
    if request.get("FormatVersion", "aws_v1") != "aws_v1":
        raise InvalidParameterException("FormatVersion must be aws_v1")
    publication = dt.datetime.fromtimestamp(engine.clock.origin, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    items = [item for item in _products(engine.scenario, publication) if _matches(item, request.get("Filters", []))]
    start = paging.offset(request.get("NextToken"), request, "GetProducts", InvalidParameterException)
    limit = int(request.get("MaxResults") or DEFAULT_PAGE)
    result: dict[str, Any] = {
        "FormatVersion": "aws_v1",
        "PriceList": [json.dumps(item) for item in items[start : start + limit]],
    }
    if start + limit < len(items):
        result["NextToken"] = paging.token(request, "GetProducts", start + limit)
    return result
