"""What a job says (its failure reason, status messages, exit message, log lines) through Airflow's secrets
masker before anything stores or logs it: a container that echoes a masked Variable or the connection's
password must not put it in an XCom, the ledger, a trigger event or a task log in clear.

The masker knows what its process registered: in a worker, the connection's secrets and every masked
Variable and connection the task's templates read; in the triggerer, the secrets of the connections its
triggers use. So the task remembers which Variables and connections its templates read (names only: a value
handed to the trigger would be stored with its kwargs), and the trigger reads them again in the triggerer
through Airflow's own ``Variable.get`` and ``Connection.get``, which register the masked values with the
triggerer's masker as the worker's did (a connection's password and extra). Job log lines and events the
triggerer shows or stores are then masked like the worker's. What the task masks any other way (a Variable or
connection the DAG file's own code reads, a value given to ``mask_secret``) is not known to the trigger: read
it in a template of the operator instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from airflow_sm_prefs.platform import supervisor_calls

log = logging.getLogger(__name__)

T = TypeVar("T")
VariableRead = tuple[str, bool]  # (key, read as JSON)


def redacted(value: T) -> T:
    """``value`` (text, or dicts and lists of it) with every secret the process's masker knows as ``***``."""
    if value is None:
        return value
    try:
        # common.compat finds the masker wherever this Airflow line keeps it.
        from airflow.providers.common.compat.sdk import redact
    except ImportError:  # pragma: no cover - every supported Airflow ships common.compat with the amazon provider
        return value
    result: Any = redact(value)
    return result  # type: ignore[no-any-return]


class _RecordingAccessor:
    """A template context's accessor (``var.value``, ``var.json``, ``conn``) that hands every read to Airflow's
    and remembers the name read: what the task's templates read, for the trigger to read again in the
    triggerer."""

    def __init__(self, accessor: Any, remember: Callable[[str], None]) -> None:
        self._accessor = accessor
        self._remember = remember

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # Jinja and copy probe for protocols; those are never Variables or connections
            raise AttributeError(name)
        value = getattr(self._accessor, name)
        self._remember(name)
        return value

    def get(self, name: str, *default: Any) -> Any:
        value = self._accessor.get(name, *default)
        # The default itself (given, or the connection accessor's None): nothing of that name, nothing to mask.
        if value is not (default[0] if default else None):
            self._remember(name)
        return value


@dataclass
class SecretsRead:
    """What a task's templates read that Airflow masks: Variables as (key, read as JSON), connections by id."""

    variables: set[VariableRead] = field(default_factory=set)
    connections: set[str] = field(default_factory=set)


@contextmanager
def secrets_read(context: MutableMapping[str, Any]) -> Iterator[SecretsRead]:
    """While rendering templates with ``context``: the Variables and connections they read."""
    read = SecretsRead()
    variables, connections = context.get("var"), context.get("conn")
    if isinstance(variables, dict) and {"value", "json"} <= variables.keys():
        context["var"] = {
            "value": _RecordingAccessor(variables["value"], lambda key: read.variables.add((key, False))),
            "json": _RecordingAccessor(variables["json"], lambda key: read.variables.add((key, True))),
        }
    if connections is not None:
        context["conn"] = _RecordingAccessor(connections, read.connections.add)
    # A context without Airflow's accessors (a unit test's) records nothing.
    try:
        yield read
    finally:
        if variables is not None:
            context["var"] = variables
        if connections is not None:
            context["conn"] = connections


async def mask_variables(variables: list[VariableRead]) -> None:
    """Read these Variables in this process (the triggerer), so its masker hides the ones Airflow masks,
    as the task's worker did. A Variable that cannot be read is named in the log, never fatal."""
    if not variables:
        return
    from airflow.sdk import Variable

    for key, as_json in variables:
        try:
            await supervisor_calls.ask(Variable.get, key, deserialize_json=as_json)
        except Exception as error:  # gone since the task read it, or a secrets backend refusing the triggerer
            log.warning("Could not read Variable %r in the triggerer to mask it in the job's log lines: %s", key, error)


async def mask_connections(conn_ids: list[str]) -> None:
    """Read these connections in this process (the triggerer) and mask their password and extra, as reading
    them in the task's worker did. A connection that cannot be read is named in the log, never fatal."""
    if not conn_ids:
        return
    from airflow.sdk import Connection
    from airflow.sdk.log import mask_secret  # where the Task SDK keeps it on 3.1 to 3.3 (common.compat: 3.2 on)

    for conn_id in conn_ids:
        try:
            connection = await supervisor_calls.ask(Connection.get, conn_id)
        except Exception as error:
            log.warning(
                "Could not read connection %r in the triggerer to mask it in the job's log lines: %s", conn_id, error
            )
            continue
        # Airflow 3.3 masks these as it reads them; earlier Task SDKs leave it to the reader.
        for secret in (connection.password, connection.extra):
            if secret:
                mask_secret(secret)
