"""The status lines a person wants in the task log, from a ``JobView``."""

from __future__ import annotations

from airflow_sm_prefs.platform.formatting import format_seconds
from airflow_sm_prefs.sagemaker.job_view import JobView


def status_line(view: JobView) -> str:
    line = f"SageMaker {view.kind.name} job {view.name}: {view.status}"
    if view.secondary_status:
        line += f" / {view.secondary_status}"
    if view.status_message:
        line += f" ({view.status_message})"
    return line


def selection_line(view: JobView) -> str | None:
    if view.selected is None:
        return None
    rank = view.selected_rank
    which = f"preference #{rank + 1} of {len(view.preferences)}" if rank is not None else "an unlisted configuration"
    fallback = " (first choice)" if rank == 0 else " (fallback)" if rank else ""
    return (
        f"SageMaker selected {which}{fallback}: {view.selected_count} x {view.selected_type}, after waiting "
        f"{format_seconds(view.pending_seconds())} for capacity"
    )
