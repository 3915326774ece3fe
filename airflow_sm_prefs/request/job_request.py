"""The request a task sends: ``config`` and the friendly arguments merged, cast and checked, before any call.

Raises :class:`InvalidJobRequest` with every problem found; returns the request and the warnings (things
SageMaker accepts but ignores) the task should log. Values still templated are left for the run-time check,
everything else is judged at once, so a DAG with a templated role or S3 path still has its preference
list checked when the file is parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_sm_prefs.request.friendly_preferences import PreferenceLike, to_api_entries
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import (
    TEMPLATE_MARKERS,
    RequestValidationError,
    is_templated,
    job_name_problems,
    template_markers,
)


class InvalidJobRequest(RequestValidationError, AirflowFailException):
    """A request SageMaker would refuse. Wherever it is raised (a DAG file's parse, a task's run, a mapped
    task's expansion) retrying cannot help, so it fails the task without retries."""


@contextmanager
def refusing() -> Iterator[None]:
    """Turn a rule's RequestValidationError into InvalidJobRequest."""
    try:
        yield
    except InvalidJobRequest:
        raise
    except RequestValidationError as error:
        raise InvalidJobRequest(error.problems) from None


def template_markers_of(dag: Any) -> tuple[str, ...]:
    """The delimiters Airflow will render a task's fields with: Jinja's, or the DAG's own."""
    options = (getattr(dag, "jinja_environment_kwargs", None) or {}) if dag is not None else {}
    variable, block, comment = TEMPLATE_MARKERS
    return (
        options.get("variable_start_string", variable),
        options.get("block_start_string", block),
        options.get("comment_start_string", comment),
    )


# What ``preferences=`` takes: the friendly forms, first choice first; a template that renders to them; or None,
# when the list is in the request itself.
PreferencesArgument = Sequence[PreferenceLike] | str | None


def friendly_preferences(value: PreferencesArgument) -> Any:
    """``preferences=`` in API form now when it is static; a template string is kept for rendering."""
    if value is None or isinstance(value, str):
        return value
    with refusing():
        return to_api_entries(value)


def prepare(
    kind: JobKind,
    config: Any,
    preferences: Any,
    max_pending: int | None,
    *,
    markers: tuple[str, ...] = TEMPLATE_MARKERS,
    job_name: Any = None,
) -> tuple[dict[str, Any], list[str]]:
    """``markers`` are the Jinja delimiters still to be rendered; none once the task has rendered its fields.
    ``job_name`` is the operator's argument, judged like the request's own name field."""
    with refusing(), template_markers(markers):
        named = job_name_problems(job_name, "job_name")
        if named:
            raise RequestValidationError(named)
        parsed = _parse_json(config, "config") if isinstance(config, str) else config
        if not isinstance(parsed, Mapping):
            raise RequestValidationError(
                [
                    f"config must be the {kind.name_field.removesuffix('JobName')}Job request as a mapping (or JSON "
                    f"text of one), got {type(parsed).__name__}"
                ]
            )
        if isinstance(preferences, str) and not is_templated(preferences):
            preferences = to_api_entries(_parse_json(preferences, "preferences"))
        request = kind.prepare(parsed, preferences, max_pending)
        return request, kind.validate(request)


def rendered(
    kind: JobKind,
    config: Any,
    preferences: Any,
    *,
    max_pending: int | None,
    job_name: Any,
    check_instance_types: Callable[[JobKind, Mapping[str, Any]], None],
    log: Any,
) -> dict[str, Any]:
    """The request after the task rendered its fields, judged whole (nothing in it is a template any more,
    and each listed type is one the installed botocore knows): ``InvalidJobRequest`` names every problem."""
    try:
        request, warnings = prepare(kind, config, preferences, max_pending=max_pending, markers=(), job_name=job_name)
        with refusing():
            check_instance_types(kind, request)
    except RequestValidationError as error:
        raise InvalidJobRequest([*error.problems, "no SageMaker job was created"]) from None
    for warning in warnings:
        log.warning(warning)
    return request


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        hint = (
            " It looks like a Python list: set render_template_as_native_obj=True on the DAG, or render JSON "
            "with the `tojson` filter."
            if text.lstrip().startswith(("[(", "['", '["', "[{")) or "'" in text
            else ""
        )
        raise RequestValidationError(
            [f"{what} rendered to text that is not JSON ({error.msg}, at character {error.pos}).{hint}"]
        ) from None
