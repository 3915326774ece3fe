"""A total deadline for one operation on the shared store.

botocore's connect and read timeouts bound each request, but one operation of fsspec's is several requests,
each retried (by botocore, then by s3fs), and a local folder on a network mount has no timeout at all. A task
that waits on the evidence side (its cost estimate, its ledger entry) must not wait on a store that accepts
and never answers. So the operation runs in a thread of its own and its caller waits a bounded time: past the
deadline it gets ``StoreTimedOut`` while the thread, bounded by the client's own timeouts, ends by itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from airflow_sm_prefs.storage.object_storage import (
    MISSING_BUCKET_FIX,
    SECTION,
    StorageSettingError,
    StorageUnavailable,
    deadline_seconds,
    missing_bucket_said,
    shown,
)

_Result = TypeVar("_Result")


class StoreTimedOut(StorageUnavailable):
    """The store did not answer one operation within its deadline."""


THREAD_PREFIX = "sm-prefs-store: "  # a store call's thread, alive while the call is: named after what it does


def within(what: str, operation: Callable[[], _Result], seconds: float | None = None) -> _Result:
    """``operation()``'s result, or what it raised; ``StoreTimedOut`` naming ``what`` once ``seconds`` (default:
    ``[sm_prefs] storage_timeout``) have passed without an answer."""
    limit = deadline_seconds() if seconds is None else seconds
    outcome: list[_Result] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(operation())
        except BaseException as error:  # handed to the caller, whatever it is
            failure.append(error)

    # A daemon thread: one the store never answers must not keep the process from exiting.
    worker = threading.Thread(target=run, name=f"{THREAD_PREFIX}{what}"[:60], daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise StoreTimedOut(
            f"{what}: no answer from the store within {limit:g} s; check the network path to it (endpoint, proxy, "
            f"firewall) or raise [{SECTION}] storage_timeout"
        )
    if failure:
        raise failure[0]
    return outcome[0]


def in_an_existing_bucket(path: Any, setting: str) -> Any:
    """``path``, refused (``StorageSettingError``) when its bucket does not exist, asked within the deadline: else
    a command would answer "none yet", as if the store were empty."""
    said = within(f"the bucket of {shown(path)}", lambda: missing_bucket_said(path, setting))
    if said is not None:
        raise StorageSettingError(f"{said}; {MISSING_BUCKET_FIX}")
    return path
