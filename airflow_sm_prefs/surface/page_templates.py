"""The Capacity page's Jinja templates (``templates/``), autoescaped: every value from outside (a task id, a
reason, a plan's name) is escaped by the template, never by hand. Jinja2 ships with Airflow.
"""

from __future__ import annotations

import datetime as dt
from functools import cache
from typing import Any

TEMPLATES = "templates"


def utc(epoch_seconds: float) -> str:
    return dt.datetime.fromtimestamp(epoch_seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def moment(text: str) -> dt.datetime:
    """An ISO 8601 time the CLI kept, in UTC when it names no zone; now when it cannot be read."""
    try:
        found = dt.datetime.fromisoformat(text)
    except ValueError:
        return dt.datetime.now(dt.UTC)
    return found if found.tzinfo else found.replace(tzinfo=dt.UTC)


def _when(text: str) -> str:
    return moment(text).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@cache
def _environment() -> Any:
    import jinja2

    from airflow_sm_prefs.reference.prices import format_usd
    from airflow_sm_prefs.surface import charts

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("airflow_sm_prefs.surface", TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(seconds=charts.seconds, usd=format_usd, when=_when, utc=utc, jobs=charts.jobs)
    return environment


def render(template: str, **values: Any) -> str:
    """The template rendered. A page body rendered here is embedded in ``page.html`` as it is (``| safe``):
    whatever it holds from outside was escaped when it was rendered."""
    return str(_environment().get_template(template).render(**values))
