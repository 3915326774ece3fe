"""Checks requests and responses against botocore's SageMaker service model.

The emulator plays the service, so it checks everything the model declares (required members, types,
enums, both ends of ranges and lengths, patterns), not only the subset botocore checks client-side.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator
from typing import Any

from botocore.model import OperationModel, ServiceModel, Shape, StructureShape

from sm_prefs_devkit.emulator.errors import shorten

# Java regex classes used in the SageMaker model, spelled for Python's `re`.
_JAVA_CLASSES = {
    r"\p{Alnum}": "a-zA-Z0-9",
    r"\p{L}": "a-zA-Z\u00c0-\uffff",
    r"\p{Z}": " \u00a0\u2000-\u200a\u2028\u2029\u3000",
    r"\p{N}": "0-9",
}


@functools.cache
def service_model(service: str = "sagemaker") -> ServiceModel:
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def operation(name: str, service: str = "sagemaker") -> OperationModel:
    return service_model(service).operation_model(name)


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    translated = pattern
    for java, python in _JAVA_CLASSES.items():
        translated = translated.replace(java, python)
    try:
        return re.compile(translated, re.DOTALL)
    except re.error:
        # A handful of model patterns use surrogate ranges Python cannot express; those are skipped.
        return None


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return repr(shorten(value))
    return shorten(repr(value)) if not isinstance(value, dict | list) else f"<{type(value).__name__}>"


def violations(shape: Shape, value: Any, path: str) -> Iterator[str]:
    """Yield one message per constraint of ``shape`` that ``value`` breaks, naming the member path."""
    kind = shape.type_name
    meta = shape.metadata
    if kind == "structure":
        assert isinstance(shape, StructureShape)
        if not isinstance(value, dict):
            yield _wrong_type(value, path, "a structure")
            return
        for required in shape.required_members:
            if value.get(required) is None:
                yield f"'{_join(path, required)}' is required but was not provided"
        for key, member_value in value.items():
            if key not in shape.members:
                yield f"Unknown parameter '{_join(path, shorten(key))}'"
                continue
            yield from violations(shape.members[key], member_value, _join(path, key))
        return
    if kind == "list":
        if not isinstance(value, list):
            yield _wrong_type(value, path, "a list")
            return
        yield from _length(meta, len(value), path, f"{len(value)} items")
        for index, item in enumerate(value):
            yield from violations(shape.member, item, f"{path}[{index}]")  # type: ignore[attr-defined]
        return
    if kind == "map":
        if not isinstance(value, dict):
            yield _wrong_type(value, path, "a map")
            return
        yield from _length(meta, len(value), path, f"{len(value)} entries")
        for key, item in value.items():
            yield from violations(shape.key, key, f"{path}.key")  # type: ignore[attr-defined]
            yield from violations(shape.value, item, f"{path}[{shorten(str(key))}]")  # type: ignore[attr-defined]
        return
    if kind == "string":
        if not isinstance(value, str):
            yield _wrong_type(value, path, "a string")
            return
        yield from _length(meta, len(value), path, _describe(value))
        enum: list[str] = getattr(shape, "enum", [])
        if enum and value not in enum:
            yield (
                f"Value {_describe(value)} at '{path}' failed to satisfy constraint: "
                f"Member must satisfy enum value set ({len(enum)} values)"
            )
        pattern = meta.get("pattern")
        if pattern and (compiled := _compiled(pattern)) is not None and not compiled.fullmatch(value):
            yield (
                f"Value {_describe(value)} at '{path}' failed to satisfy constraint: "
                f"Member must satisfy regular expression pattern: {pattern}"
            )
        return
    if kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            yield _wrong_type(value, path, "an integer")
            return
        yield from _bounds(meta, value, path, str(value), "value")
        return
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield _wrong_type(value, path, "a number")
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            yield _wrong_type(value, path, "a boolean")
        return
    if kind == "timestamp":
        try:
            to_epoch(value)
        except ValueError:
            yield _wrong_type(value, path, "a timestamp")
        return


TYPE_MISMATCH = "failed to satisfy constraint: Member must be"


def _wrong_type(value: Any, path: str, expected: str) -> str:
    return f"Value {_describe(value)} at '{path}' {TYPE_MISMATCH} {expected}"


def is_type_mismatch(message: str) -> bool:
    """A value of the wrong JSON type: a JSON service answers it SerializationException, not a validation error."""
    return TYPE_MISMATCH in message


def to_epoch(value: Any) -> float:
    """A timestamp as clients send it (epoch seconds, or ISO 8601 text); ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a timestamp")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()
    raise ValueError(f"{type(value).__name__} is not a timestamp")


def _length(meta: dict[str, Any], length: int, path: str, shown: str) -> Iterator[str]:
    yield from _bounds(meta, length, path, shown, "length")


def _bounds(meta: dict[str, Any], measured: int, path: str, shown: str, what: str) -> Iterator[str]:
    """Both ends of a model range; the service checks the maximum too, botocore only the minimum."""
    if "min" in meta and measured < meta["min"]:
        yield (
            f"Value {shown} at '{path}' failed to satisfy constraint: "
            f"Member must have {what} greater than or equal to {meta['min']}"
        )
    if "max" in meta and measured > meta["max"]:
        yield (
            f"Value {shown} at '{path}' failed to satisfy constraint: "
            f"Member must have {what} less than or equal to {meta['max']}"
        )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def request_violations(operation_name: str, request: dict[str, Any], service: str = "sagemaker") -> list[str]:
    shape = operation(operation_name, service).input_shape
    return list(violations(shape, request, "")) if shape is not None else []


def response_violations(operation_name: str, response: dict[str, Any], service: str = "sagemaker") -> list[str]:
    shape = operation(operation_name, service).output_shape
    return list(violations(shape, response, "")) if shape is not None else []


def enum_values(shape_name: str) -> list[str]:
    return list(getattr(service_model().shape_for(shape_name), "enum", []))
