"""What each command-line argument accepts, judged by argparse before any command runs: a bad value is one line
naming the argument, exit status 2, and no call to AWS or the store.

Every value a person types is judged here, for every command (``cli``, ``plans_commands``): durations and times,
percentages and amounts, and the names that select evidence. A name that cannot be one (an empty ``--dag-id``
from an unset shell variable, a Region that is no Region's shape) would otherwise select nothing, or everything,
and read as an answer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
from typing import Any

from airflow_sm_prefs.request.preferences import REGION_SHAPE

MAX_DAYS = 36_500  # a hundred years back is as far as any ledger or account history goes
# Airflow's own rule for a DAG or task id (``airflow.utils.helpers.KEY_REGEX``, at most 250 characters).
AIRFLOW_ID = re.compile(r"[\w.-]{1,250}")


def _duration(text: str) -> dt.timedelta | None:
    """``30d``, ``12h``, ``90m`` as a ``timedelta`` of at most ``MAX_DAYS``; None for anything else."""
    units = {"d": "days", "h": "hours", "m": "minutes"}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isascii() or not number.isdigit() or len(number) > 9:
        return None
    age = dt.timedelta(**{units[unit]: int(number)})
    return age if age <= dt.timedelta(days=MAX_DAYS) else None


def since(text: str) -> Any:
    """``30d``, ``12h``, ``90m`` (that long ago) or an ISO 8601 date or time."""
    import pendulum

    age = _duration(text)
    if age is not None:
        return pendulum.now("UTC") - age
    try:
        moment = pendulum.parse(text)
    except (ValueError, TypeError):
        moment = None
    if not isinstance(moment, pendulum.DateTime):
        raise argparse.ArgumentTypeError(
            f"--since takes 30d, 12h, 90m (at most {MAX_DAYS}d) or an ISO 8601 time, not {text[:40]!r}"
        )
    return moment


def age(text: str) -> dt.timedelta:
    """``1d``, ``12h``, ``90m``: an age."""
    found = _duration(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"--older-than takes 1d, 12h or 90m (at most {MAX_DAYS}d), not {text[:40]!r}")
    return found


def percent(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = -1.0
    if not 0 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 10000, not {text[:40]!r}")
    return value


def positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= 87_600:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to 87600, not {text[:40]!r}")
    return int(text)


def days(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= 3650:
        raise argparse.ArgumentTypeError(f"a whole number of days from 1 to 3650, not {text[:40]!r}")
    return int(text)


def moment(text: str) -> dt.datetime:
    try:
        found = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an ISO 8601 time such as 2026-12-05T21:00Z, not {text[:40]!r}") from None
    return found if found.tzinfo else found.replace(tzinfo=dt.UTC)


def amount(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"a positive amount of US dollars, not {text[:40]!r}")
    return value


def amount_or_zero(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else amount(text)


def airflow_id(text: str) -> str:
    """A DAG or task id as Airflow allows one: letters, digits, ``_``, ``.`` and ``-``, 1 to 250 of them."""
    if not AIRFLOW_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"an Airflow id (letters, digits, '_', '.', '-'), not {text[:40]!r}")
    return text


def region(text: str) -> str:
    if not REGION_SHAPE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"an AWS Region such as us-east-1, not {text[:40]!r}")
    return text
