"""What a job says (its failure reason, status messages, exit message, log lines) through Airflow's secrets
masker before anything stores or logs it: a container that echoes a masked Variable or the connection's
password must not put it in an XCom, the ledger, a trigger event or a task log in clear.

The masker knows what its process registered: in a worker, the connection's secrets and every masked
Variable the task's templates read; in the triggerer, the secrets of the connections its triggers use.
"""

from __future__ import annotations

import re
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


def worker_secrets() -> list[str]:
    """The secrets this process's masker holds (the task's connections and the masked Variables its templates
    read), for a trigger to mask too: the triggerer has never seen the task's Variables."""
    masker: Any = None
    try:
        from airflow.sdk._shared.secrets_masker import _secrets_masker

        masker = _secrets_masker()
    except ImportError:  # another Airflow line keeps it elsewhere; the trigger then masks what it knows
        return []
    # The masker keeps each secret as a regular expression made by re.escape, which only adds backslashes.
    return sorted({re.sub(r"\\(.)", r"\1", pattern, flags=re.DOTALL) for pattern in getattr(masker, "patterns", ())})


def encrypted_at_rest() -> bool:
    """Whether Airflow encrypts what a trigger is built from (its kwargs) with a Fernet key."""
    try:
        from airflow.models.crypto import get_fernet

        return bool(getattr(get_fernet(), "is_encrypted", False))
    except Exception:  # no Airflow core here, or no key: treat as stored in clear
        return False


def mask(secrets: list[str]) -> None:
    """Register ``secrets`` with this process's masker (in the triggerer, what the task's worker knew)."""
    if not secrets:
        return
    from airflow.providers.common.compat.sdk import mask_secret

    for secret in secrets:
        mask_secret(secret)
