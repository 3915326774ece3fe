"""Turns successive Describe responses into the status lines a person wants in the task log, once each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_sm_prefs import record
from airflow_sm_prefs.jobs import JobKind


def status_line(kind: JobKind, description: Mapping[str, Any]) -> str:
    name = description.get(kind.name_field)
    status = description.get(kind.status_field)
    secondary = description.get("SecondaryStatus")
    line = f"SageMaker {kind.name} job {name}: {status}" + (f" / {secondary}" if secondary else "")
    transitions = description.get("SecondaryStatusTransitions") or []
    if transitions and transitions[-1].get("StatusMessage"):
        line += f" ({transitions[-1]['StatusMessage']})"
    return line


def selection_line(kind: JobKind, description: Mapping[str, Any]) -> str | None:
    chosen = kind.selected(description)
    if chosen is None:
        return None
    rank = record.selected_rank(kind, description)
    total = len(kind.resources(description).get("InstancePreferences") or [])
    waited = record.pending_seconds(kind, description)
    which = f"preference #{rank + 1} of {total}" if rank is not None else "an unlisted configuration"
    fallback = " (first choice)" if rank == 0 else " (fallback)" if rank else ""
    return (
        f"SageMaker selected {which}{fallback}: {chosen[1]} x {chosen[0]}, after waiting "
        f"{format_seconds(waited)} for capacity"
    )


def format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
