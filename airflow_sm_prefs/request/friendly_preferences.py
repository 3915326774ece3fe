"""The friendly forms a DAG may write a preference list in, and the API's entries they stand for.

An ``InstancePreference``, a snake_case mapping, a type name (``"ml.p5.48xlarge"``) or ``(type, count)``: each
becomes the ``InstancePreferences`` entry SageMaker takes, and is then judged by the rules in ``preferences``
like any entry written in the API's own form. Only ordered sequences are taken: the order is the preference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.request.preferences import RequestValidationError, brief


@dataclass(frozen=True)
class InstancePreference:
    """One acceptable configuration: an instance type, optionally its own count and a training plan."""

    instance_type: str
    instance_count: int | None = None
    training_plan_arn: str | None = None

    def to_api(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"InstanceType": self.instance_type}
        if self.instance_count is not None:
            entry["InstanceCount"] = self.instance_count
        if self.training_plan_arn is not None:
            entry["TrainingPlanArns"] = [self.training_plan_arn]
        return entry


PreferenceLike = InstancePreference | Mapping[str, Any] | str | tuple[str, int]

_FRIENDLY_KEYS = {
    "instance_type": "InstanceType",
    "instance_count": "InstanceCount",
    "count": "InstanceCount",
    "training_plan_arn": "TrainingPlanArns",
}


def to_api_entries(preferences: Any) -> list[dict[str, Any]]:
    """Turn the friendly forms (objects, snake_case dicts, ``"ml.x"`` or ``("ml.x", 2)``) into API entries.

    Only ordered sequences are accepted: the order is the preference. A mapping (``{"ml.x": 2}``) or a set
    could be read more than one way, so they are refused rather than guessed at.
    """
    if isinstance(preferences, Mapping):
        raise RequestValidationError(
            [
                "preferences is a mapping; give an ordered list such as "
                "[('ml.p5.48xlarge', 2), ('ml.p4d.24xlarge', 4)] (a mapping's keys and values could mean types "
                "and counts, or one preference's fields)"
            ]
        )
    if isinstance(preferences, set | frozenset):
        raise RequestValidationError(["preferences is a set, which has no order; give a list, first choice first"])
    if isinstance(preferences, str | bytes) or not isinstance(preferences, Sequence):
        raise RequestValidationError(
            [f"preferences must be a list of preferences, first choice first; got {type(preferences).__name__}"]
        )
    entries = []
    for index, preference in enumerate(preferences):
        if isinstance(preference, InstancePreference):
            entries.append(preference.to_api())
        elif isinstance(preference, str):
            entries.append({"InstanceType": preference})
        elif isinstance(preference, tuple | list) and len(preference) == 2 and isinstance(preference[0], str):
            entries.append({"InstanceType": preference[0], "InstanceCount": preference[1]})
        elif isinstance(preference, Mapping):
            entry: dict[str, Any] = {}
            for key, value in preference.items():
                api_key = _FRIENDLY_KEYS.get(str(key), str(key))
                if api_key == "TrainingPlanArns" and isinstance(value, str):
                    value = [value]
                entry[api_key] = value
            entries.append(entry)
        else:
            raise RequestValidationError(
                [
                    f"preference #{index + 1}: expected InstancePreference, a mapping, a type name or (type, count); "
                    f"got {type(preference).__name__} {brief(preference)}"
                ]
            )
    return entries
