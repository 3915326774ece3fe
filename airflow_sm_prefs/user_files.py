"""Files a user keeps beside Airflow (the price table, the instance catalogue, ...): parsed once per process
and read again only when the file changes, so a long-lived triggerer or API server sees an edit without a
restart and a task does not re-parse the file on every call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_parsed: dict[tuple[str, Callable[[Path], Any]], tuple[float, Any]] = {}


def parsed(path: Path, parse: Callable[[Path], T]) -> T:
    """``parse(path)``, from memory while the file's modification time is unchanged. ``OSError`` when the file
    cannot be found; whatever ``parse`` raises is raised again on the next call (a failure is not kept)."""
    stamp = path.stat().st_mtime
    key = (str(path), parse)
    kept = _parsed.get(key)
    if kept is not None and kept[0] == stamp:
        return kept[1]  # type: ignore[no-any-return]
    value = parse(path)
    _parsed[key] = (stamp, value)
    return value
