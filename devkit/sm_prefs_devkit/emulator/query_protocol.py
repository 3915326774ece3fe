"""AWS's query protocol, the server's side: form fields in, XML out, directed by the botocore model.

CloudWatch's clients before botocore 1.42 (MWAA 3.1's among them) send ``Action=GetMetricData&...`` as a form
and read an XML reply; newer ones speak AWS JSON 1.0 (``X-Amz-Target: GraniteServiceVersion20100801.<Op>``).
Only what the emulator serves is covered: structures, lists (``.member.N``), strings, numbers, booleans and timestamps.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from xml.sax.saxutils import escape

from botocore.model import ListShape, Shape, StructureShape

from sm_prefs_devkit.emulator.errors import SerializationException

XMLNS = {"cloudwatch": "http://monitoring.amazonaws.com/doc/2010-08-01/"}


def decode(form: dict[str, str], shape: Shape, prefix: str = "") -> Any:
    """The request ``form`` describes, as the JSON protocols would carry it."""
    if isinstance(shape, StructureShape):
        found = {}
        for name, member in shape.members.items():
            key = f"{prefix}.{name}" if prefix else name
            if key in form or any(field.startswith(f"{key}.") for field in form):
                found[name] = decode(form, member, key)
        return found
    if isinstance(shape, ListShape):
        indices = sorted(
            {int(rest.split(".", 1)[0]) for field in form if (rest := _after(field, f"{prefix}.member.")) is not None}
        )
        return [decode(form, shape.member, f"{prefix}.member.{index}") for index in indices]
    text = form[prefix]
    try:
        if shape.type_name in ("integer", "long"):
            return int(text)
        if shape.type_name in ("double", "float"):
            return float(text)
    except ValueError:
        raise SerializationException(f"{prefix}: {text!r} is not a {shape.type_name}") from None
    if shape.type_name == "boolean":
        return text == "true"
    return text


def _after(field: str, prefix: str) -> str | None:
    if not field.startswith(prefix):
        return None
    rest = field[len(prefix) :]
    return rest if rest.split(".", 1)[0].isdigit() else None


def encode(service: str, action: str, result: dict[str, Any], shape: Shape | None, request_id: str) -> bytes:
    body = _xml(result, shape) if shape is not None else ""
    return (
        f'<{action}Response xmlns="{XMLNS[service]}"><{action}Result>{body}</{action}Result>'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
    ).encode()


def error(service: str, code: str, message: str, request_id: str) -> bytes:
    return (
        f'<ErrorResponse xmlns="{XMLNS[service]}"><Error><Type>Sender</Type><Code>{escape(code)}</Code>'
        f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
    ).encode()


def _xml(value: Any, shape: Shape) -> str:
    if isinstance(shape, StructureShape):
        return "".join(
            f"<{name}>{_xml(value[name], member)}</{name}>"
            for name, member in shape.members.items()
            if value.get(name) is not None
        )
    if isinstance(shape, ListShape):
        return "".join(f"<member>{_xml(item, shape.member)}</member>" for item in value)
    if shape.type_name == "timestamp":
        return dt.datetime.fromtimestamp(float(value), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))
