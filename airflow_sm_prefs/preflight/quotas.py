"""The account's SageMaker instance quotas, read through the Service Quotas API for the quota preflight.

SageMaker names them ``"<instance type> for training job usage"`` and ``"... for processing job usage"``; they
are found by name (``ListServiceQuotas``, service code ``sagemaker``), since their quota codes differ per
type and are not published as a table. One listing per connection and Region is kept for a few minutes, so
a DAG run's many tasks read it once. An identity that may not read quotas is told once in the log, and the
task goes on: SageMaker still checks the quotas when the job is created.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from airflow_sm_prefs.sagemaker.hooks import error_code

log = logging.getLogger(__name__)

CACHE_SECONDS = 300.0
DENIED_CODES = ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "NoSuchResourceException")

_lock = threading.Lock()
_cache: dict[tuple[Any, ...], tuple[float, dict[str, float] | None]] = {}


class QuotasUnreadable(Exception):
    """This identity cannot read the quotas (no permission, or no Service Quotas where the call went)."""


def _listing(client: Any) -> dict[str, float]:
    quotas: dict[str, float] = {}
    for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
        for quota in page.get("Quotas", []):
            if isinstance(quota.get("QuotaName"), str) and isinstance(quota.get("Value"), int | float):
                quotas[quota["QuotaName"]] = float(quota["Value"])
    return quotas


def sagemaker_quotas(client: Any, key: tuple[Any, ...], now: float | None = None) -> dict[str, float]:
    """Quota name -> value for the connection and Region ``key`` names (cached ``CACHE_SECONDS``, a refusal
    too, so a run's tasks do not each ask again); ``QuotasUnreadable`` when this identity may not read them."""
    now = time.monotonic() if now is None else now
    with _lock:
        cached = _cache.get(key)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        if cached[1] is None:
            raise QuotasUnreadable("reading quotas was refused a moment ago")
        return cached[1]
    try:
        quotas: dict[str, float] | None = _listing(client)
    except Exception as error:
        if error_code(error) not in DENIED_CODES:
            raise
        quotas = None
        refusal = f"{error_code(error)}: {error}"
    with _lock:
        _cache[key] = (now, quotas)
    if quotas is None:
        raise QuotasUnreadable(refusal)
    return quotas


def forget() -> None:
    with _lock:
        _cache.clear()
