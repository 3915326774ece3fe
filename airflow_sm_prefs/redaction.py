"""What a job says (its failure reason, status messages, exit message, log lines) through Airflow's secrets
masker before anything stores or logs it: a container that echoes a masked Variable or the connection's
password must not put it in an XCom, the ledger, a trigger event or a task log in clear.

The masker knows what its process registered: in a worker, the connection's secrets and every masked
Variable the task's templates read; in the triggerer, only the secrets of the connections its triggers use.
So a masked Variable that only the worker read is masked in the XCom record, the ledger and the task's error,
but not yet in the job log lines the triggerer shows or the event it stores (handing the values to the
trigger in its kwargs would put them in the metadata database in clear).
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def redacted(value: T) -> T:
    """``value`` (text, or dicts and lists of it) with every secret the process's masker knows as ``***``."""
    if value is None:
        return value
    try:
        # common.compat finds the masker wherever this Airflow line keeps it.
        from airflow.providers.common.compat.sdk import redact
    except ImportError:  # pragma: no cover - every supported Airflow ships common.compat with the amazon provider
        return value
    result: Any = redact(value)
    return result  # type: ignore[no-any-return]
