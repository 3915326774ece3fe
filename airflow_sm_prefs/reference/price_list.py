"""Refreshing the price table from the AWS Price List Query API (``pricing:GetProducts``).

SageMaker's instance prices are products of service ``AmazonSageMaker``, family ``ML Instance``; attribute
``platoinstancetype`` says what the instance is for (``Training``, ``Processing``, ``Hosting``, ...), and
each product's ``OnDemand`` terms give a USD price per ``Hrs``. The instance type is read from the usage
type (``USE1-Train:ml.m5.xlarge``), the one attribute every such product carries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SERVICE_CODE = "AmazonSageMaker"
PRODUCT_FAMILY = "ML Instance"
PURPOSE = {"training": "Training", "processing": "Processing"}
# The Price List Query API answers in these Regions only, whatever Region the prices are for.
API_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")


@dataclass
class Retrieved:
    prices: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # region -> kind -> type -> USD/h
    products: int = 0
    skipped: int = 0  # products without a single on-demand USD hourly price, or not in a Region
    conflicts: list[str] = field(default_factory=list)
    published: set[str] = field(default_factory=set)

    def count(self) -> int:
        return sum(len(by_type) for by_kind in self.prices.values() for by_type in by_kind.values())


def _instance_type(product: dict[str, Any]) -> str | None:
    attributes = product.get("attributes") or {}
    usage = str(attributes.get("usagetype", ""))
    candidate = usage.split(":", 1)[1] if ":" in usage else str(attributes.get("instanceName", ""))
    return candidate if candidate.startswith("ml.") else None


def _hourly_usd(terms: dict[str, Any]) -> str | None:
    """The single on-demand USD price per hour of a product, if it has exactly one."""
    found = set()
    for offer in (terms.get("OnDemand") or {}).values():
        for dimension in (offer.get("priceDimensions") or {}).values():
            usd = (dimension.get("pricePerUnit") or {}).get("USD")
            if dimension.get("unit") in ("Hrs", "Hours", "hours") and usd is not None:
                found.add(str(usd))
    return found.pop() if len(found) == 1 else None


def _add(result: Retrieved, region: str, kind: str, item: dict[str, Any]) -> None:
    product = item.get("product") or {}
    attributes = product.get("attributes") or {}
    instance_type = _instance_type(product)
    price = _hourly_usd(item.get("terms") or {})
    in_region = attributes.get("regionCode", region) == region and "Outposts" not in str(
        attributes.get("locationType", "")
    )
    if instance_type is None or price is None or not in_region:
        result.skipped += 1
        return
    result.products += 1
    if item.get("publicationDate"):
        result.published.add(str(item["publicationDate"]))
    by_type = result.prices.setdefault(region, {}).setdefault(kind, {})
    known = by_type.get(instance_type)
    if known is not None and float(known) != float(price):
        # Two on-demand prices for one type: keep the higher, so a cost cap errs on the safe side.
        result.conflicts.append(f"{region} {kind} {instance_type}: {known} and {price}")
        price = known if float(known) > float(price) else price
    by_type[instance_type] = price


def retrieve(client: Any, regions: Iterable[str], kinds: Iterable[str] = tuple(PURPOSE)) -> Retrieved:
    """Every on-demand hourly price of the given Regions and kinds, through a boto3 ``pricing`` client."""
    result = Retrieved()
    paginator = client.get_paginator("get_products")
    for region in regions:
        for kind in kinds:
            filters = [
                {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                {"Type": "TERM_MATCH", "Field": "productFamily", "Value": PRODUCT_FAMILY},
                {"Type": "TERM_MATCH", "Field": "platoinstancetype", "Value": PURPOSE[kind]},
            ]
            for page in paginator.paginate(ServiceCode=SERVICE_CODE, Filters=filters, FormatVersion="aws_v1"):
                for text in page.get("PriceList", []):
                    _add(result, region, kind, json.loads(text) if isinstance(text, str) else text)
    return result


def write(retrieved: Retrieved, output: Any, endpoint: str) -> None:
    """Merge into the table at ``output``: the Regions retrieved are replaced, the others kept; the table
    says where and when its prices were read. Written whole or not at all."""
    import pendulum

    from airflow_sm_prefs.reference import prices
    from airflow_sm_prefs.storage import object_storage, untrusted_files

    table: dict[str, Any] = {}
    if output.exists() or output.is_symlink():
        # Never read or replace anything but a regular file: /dev/full reads as endless zeros, and replacing a
        # device node as root would remove it.
        try:
            table = dict(untrusted_files.read_json(output, prices.MAX_TABLE_BYTES)["prices"])
        except (untrusted_files.UntrustedFileError, KeyError, TypeError, ValueError):
            raise prices.PriceTableError(
                f"{output} exists and is not a price table (a regular JSON file); move it away"
            ) from None
    table.update(retrieved.prices)
    published = f", prices published {max(retrieved.published)}" if retrieved.published else ""
    source = (
        f"AWS Price List Query API (pricing:GetProducts, ServiceCode {SERVICE_CODE}, productFamily "
        f"'{PRODUCT_FAMILY}') at {endpoint}{published}"
    )
    document = prices.to_json(table, source, pendulum.now("UTC").to_date_string())
    prices.parse(document, str(output))  # never write a table its readers would refuse
    object_storage.replace_whole(output, json.dumps(document, indent=2, sort_keys=True), prefix=".prices-")
