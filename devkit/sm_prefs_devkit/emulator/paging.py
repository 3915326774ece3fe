"""Pagination tokens of the emulated APIs: opaque, and bound to the query they continue.

A token from one query handed to another (other filters, another operation) is refused, as the real
services refuse it, rather than silently continuing the wrong listing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from sm_prefs_devkit.emulator.errors import ServiceError

# Members that move through a listing rather than define it.
_PAGING_MEMBERS = ("nextToken", "NextToken", "limit", "MaxResults")


def _query_hash(request: dict[str, Any], operation: str) -> str:
    query = {k: v for k, v in request.items() if k not in _PAGING_MEMBERS}
    return hashlib.sha256(json.dumps([operation, query], sort_keys=True, default=str).encode()).hexdigest()[:16]


def token(request: dict[str, Any], operation: str, offset: int) -> str:
    # Standard base64: Service Quotas' model holds its tokens to [a-zA-Z0-9/+]*={0,2}.
    raw = json.dumps({"q": _query_hash(request, operation), "o": offset}).encode()
    return base64.b64encode(raw).decode()


def offset(given: Any, request: dict[str, Any], operation: str, refusal: type[ServiceError]) -> int:
    """Where the listing continues; ``refusal`` (the service's own error) for a token of another query."""
    if not given:
        return 0
    try:
        decoded = json.loads(base64.b64decode(str(given).encode(), validate=True))
        position = int(decoded["o"])
        if decoded["q"] != _query_hash(request, operation) or position < 0:
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise refusal("The specified next token is invalid for this request.") from None
    return position
