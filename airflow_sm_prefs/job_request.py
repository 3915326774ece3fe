"""The request a task sends: ``config`` and the friendly arguments merged, cast and checked, before any call.

Raises :class:`~airflow_sm_prefs.preferences.PreferenceValidationError` with every problem found; returns
the request and the warnings (things SageMaker accepts but ignores) the task should log.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_sm_prefs import preferences as rules
from airflow_sm_prefs.jobs import JobKind


def friendly_preferences(value: Any) -> Any:
    """``preferences=`` in API form now when it is static; a template string is kept for rendering."""
    if value is None or isinstance(value, str):
        return value
    return rules.to_api_entries(value)


def prepare(
    kind: JobKind, config: Mapping[str, Any] | str, preferences: Any, max_pending: int | None
) -> tuple[dict[str, Any], list[str]]:
    parsed: Mapping[str, Any] = _parse_json(config, "config") if isinstance(config, str) else config
    if isinstance(preferences, str) and not rules.is_templated(preferences):
        preferences = _parse_json(preferences, "preferences")
    request = kind.prepare(parsed, preferences, max_pending)
    if max_pending is not None and not kind.service_enforces_pending_limit and max_pending <= 0:
        raise rules.PreferenceValidationError(["max_pending must be positive"])
    return request, kind.validate(request)


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise rules.PreferenceValidationError([f"{what} rendered to text that is not JSON: {error}"]) from error
