"""The quota preflight: the account's SageMaker instance quotas, read through the Service Quotas API, and the
check (``WithinQuotas``) that no listed entry asks for more instances than its type's quota allows.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.preflight.check import Arguments, EntryCheck, Run
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError

log = logging.getLogger(__name__)

CACHE_SECONDS = 300.0
DENIED_CODES = ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation", "NoSuchResourceException")

_lock = threading.Lock()
_cache: dict[tuple[Any, ...], tuple[float, dict[str, float] | None]] = {}


class QuotasUnreadable(SageMakerPreferencesError):
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
        from airflow_sm_prefs.sagemaker.hooks import error_code  # AWS's client machinery: not at DAG parse

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


# -- the check: entries above the account's quota for their type ---------------------------------------------


def quota_violations(
    kind: JobKind, request: Mapping[str, Any], quota_of: Callable[[str], float | None]
) -> dict[int, str]:
    """Entries asking for more instances than the account's quota for their type allows (R17/P12: SageMaker
    refuses the whole list if any one listed type's quota is short, even when an earlier entry would fit)."""
    found: dict[int, str] = {}
    for entry in entries(kind, request):
        quota = quota_of(entry.instance_type)
        if quota is not None and entry.count > quota:
            name = quota_name(entry.instance_type, kind)
            found[entry.rank] = (
                f"{entry.label}: the account's quota '{name}' is {quota:g}, fewer than the {entry.count} asked for, "
                "so SageMaker would refuse the whole list; request an increase in the Service Quotas console "
                f"(service 'Amazon SageMaker', quota '{name}') or with `aws service-quotas "
                "request-service-quota-increase`"
            )
    return found


def quota_name(instance_type: str, kind: JobKind) -> str:
    return f"{instance_type} for {kind.name} job usage"


@dataclass(frozen=True)
class WithinQuotas(EntryCheck):
    """Reads the account's quotas when it runs (``quota_preflight=True``, the default); a quota that cannot be
    read skips the check, never the task."""

    arguments = ("quota_preflight",)

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> WithinQuotas | None:
        wanted = given.get("quota_preflight", True)
        if not isinstance(wanted, bool):
            raise RequestValidationError([f"quota_preflight must be True or False, got {type(wanted).__name__}"])
        return cls() if wanted else None

    def violations(self, run: Run, request: Mapping[str, Any]) -> dict[int, str]:
        try:
            known = sagemaker_quotas(run.account.quota_client(), run.account.cache_key)
        except QuotasUnreadable as refused:
            run.log.info(
                "Quota preflight skipped: this identity may not read SageMaker's quotas (%s); SageMaker "
                "still checks them when the job is created",
                refused,
            )
            return {}
        except Exception as error:  # throttled, unreachable: the preflight advises, it never fails a task
            run.log.warning(
                "Quota preflight skipped: could not read SageMaker's quotas (%s: %s)", type(error).__name__, error
            )
            return {}
        kind = run.kind
        return quota_violations(kind, request, lambda instance_type: known.get(quota_name(instance_type, kind)))
