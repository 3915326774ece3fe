"""Files a user keeps beside Airflow (the price table, the instance catalogue, ...): parsed once per process
and read again only when the file changes, so a long-lived triggerer or API server sees an edit without a
restart and a task does not re-parse the file on every call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from airflow_sm_prefs.storage import object_storage

T = TypeVar("T")

_parsed: dict[tuple[str, Callable[[Any], Any]], tuple[Any, Any]] = {}


def parsed(path: Any, parse: Callable[[Any], T]) -> T:
    """``parse(path)``, from memory while the file is unchanged (``object_storage.version_of``; ``path``: a
    ``Path`` or an ``ObjectStoragePath``). ``OSError`` when the file cannot be found; whatever ``parse`` raises
    is raised again on the next call (a failure is not kept)."""
    stamp = object_storage.version_of(path)
    key = (str(path), parse)
    kept = _parsed.get(key)
    if kept is not None and kept[0] == stamp:
        return kept[1]  # type: ignore[no-any-return]
    value = parse(path)
    _parsed[key] = (stamp, value)
    return value
