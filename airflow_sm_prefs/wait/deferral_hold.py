"""How long a trigger keeps its event after its task deferred, so that Airflow's scheduler cannot race it.

A task that defers exits, and its executor reports that exit as a success some seconds later. If the trigger's
event has by then put the task instance back in ``queued`` or ``running`` (same try), Airflow 3.1 to 3.3 take
the late report for an external kill and fail the task (apache/airflow#67287, #72716; 3.2.2 forgives only
``scheduled``). Nothing in the metadata database says when the scheduler took the report, so the only guard a
trigger has is time: none of this package's events reaches Airflow sooner than ``[sm_prefs]
deferral_hold_seconds`` after the deferral. The trigger keeps watching while it holds, so the event it sends is
the job's latest state. The selection is announced by the trigger itself, without an event, so the hold delays
only a job that ends (or a wait bound that passes) within that many seconds of the deferral: for real jobs,
which take minutes to provision, almost never. docs/how-it-works.md gives the measured windows.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from airflow_sm_prefs.errors.base import SageMakerPreferencesError

SECTION, OPTION = "sm_prefs", "deferral_hold_seconds"
# Measured from deferral to the scheduler taking the deferring try's report: up to 45 s on 2 cores at load
# 10-20 (LocalExecutor); 89 s is published for Celery under load (apache/airflow#71172). Twice the former.
DEFAULT_SECONDS = 90.0
MAX_SECONDS = 3600.0


class HoldSettingError(SageMakerPreferencesError, ValueError):
    """``[sm_prefs] deferral_hold_seconds`` is not a number of seconds this package can use."""


def configured_seconds() -> float:
    """``[sm_prefs] deferral_hold_seconds`` (default 90): 0 turns the hold off."""
    from airflow.configuration import conf

    raw = conf.get(SECTION, OPTION, fallback=None)
    return parse_seconds(raw)


def parse_seconds(raw: object) -> float:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return DEFAULT_SECONDS
    try:
        seconds = float(str(raw))
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= MAX_SECONDS:  # also refuses nan
        raise HoldSettingError(
            f"[{SECTION}] {OPTION} = {str(raw)!r:.40}: a number of seconds from 0 to {MAX_SECONDS:.0f} "
            f"(default {DEFAULT_SECONDS:.0f}); see docs/how-it-works.md, 'The deferral race'"
        )
    return seconds


def hold_until(deferred_at: str | None, seconds: float) -> str | None:
    """When the trigger of a deferral made at ``deferred_at`` (ISO text) may send its event (None: at once)."""
    if seconds <= 0 or not deferred_at:
        return None
    return (datetime.fromisoformat(deferred_at) + timedelta(seconds=seconds)).isoformat()


def seconds_since(moment: str, now: datetime) -> float:
    return (now - datetime.fromisoformat(moment)).total_seconds()


def seconds_left(until: str | None, now: datetime) -> float:
    """Seconds the trigger must still keep its event; 0 once it may send it."""
    if not until:
        return 0.0
    return max(0.0, (datetime.fromisoformat(until) - now).total_seconds())
