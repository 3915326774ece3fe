"""The instance catalogue: the hardware of every SageMaker training and processing instance type.

Shipped as ``data/instances.json`` (its sources and date inside; rebuilt by
``tools/build_instance_catalogue.py``), with the user's file over it, entry by entry: the one
``[sm_prefs] instance_catalogue`` names (``AIRFLOW__SM_PREFS__INSTANCE_CATALOGUE``), in the same shape. That is
how a type the shipped catalogue lacks (or a correction) is added.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.storage import paths, user_files

FORMAT = 1
ACCELERATORS = ("gpu", "trainium", "inferentia", "other")


class CatalogueError(SageMakerPreferencesError, ValueError):
    """A catalogue file that cannot be read as written (names the file and the entry)."""


@dataclass(frozen=True)
class Hardware:
    instance_type: str
    vcpus: int
    memory_gib: float
    cpu_architecture: str | None
    accelerator: str | None  # one of ACCELERATORS, or None for none
    accelerator_model: str | None
    accelerators: int
    accelerator_memory_gib: float | None  # per accelerator
    gpu_architecture: str | None
    efa_interfaces: int
    source: str


def _number(raw: dict[str, Any], key: str, where: str, *, integer: bool = False, optional: bool = False) -> Any:
    value: Any = raw.get(key)
    if value is None and optional:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value < 0:
        raise CatalogueError(f"{where}.{key}: expected a non-negative {'integer' if integer else 'number'}")
    return value


def _entry(name: str, raw: Any, where: str) -> Hardware:
    where = f"{where}: instances.{name}"
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: expected an object")
    accelerator = raw.get("accelerator")
    if accelerator is not None and accelerator not in ACCELERATORS:
        raise CatalogueError(f"{where}.accelerator: one of {', '.join(ACCELERATORS)} or null")
    texts = {}
    for key in ("cpu_architecture", "accelerator_model", "gpu_architecture"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise CatalogueError(f"{where}.{key}: expected text or null")
        texts[key] = raw.get(key)
    return Hardware(
        instance_type=name,
        vcpus=_number(raw, "vcpus", where, integer=True),
        memory_gib=float(_number(raw, "memory_gib", where)),
        accelerator=accelerator,
        accelerators=_number(raw, "accelerators", where, integer=True),
        accelerator_memory_gib=_number(raw, "accelerator_memory_gib", where, optional=True),
        efa_interfaces=_number(raw, "efa_interfaces", where, integer=True),
        source=str(raw.get("source", where)),
        **texts,
    )


def parse(raw: Any, where: str) -> dict[str, Hardware]:
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("instances"), dict):
        raise CatalogueError(f"{where}: expected an object with format {FORMAT} and 'instances'")
    return {name: _entry(name, entry, where) for name, entry in raw["instances"].items()}


@functools.cache
@functools.cache
def _shipped() -> dict[str, Hardware]:
    text = (paths.SHIPPED_DATA / "instances.json").read_text(encoding="utf-8")
    return parse(json.loads(text), "airflow_sm_prefs/data/instances.json")


def shipped() -> dict[str, Hardware]:
    """The catalogue this version ships, read once a process (every operator a DAG file builds reads it)."""
    return dict(_shipped())


MAX_CATALOGUE_BYTES = 16 << 20  # every SageMaker instance type is about 100 KB


def _read_users(path: Path) -> dict[str, Hardware]:
    from airflow_sm_prefs.storage import untrusted_files

    try:
        raw = untrusted_files.read_json(path, MAX_CATALOGUE_BYTES)
    except untrusted_files.UntrustedFileError as error:
        raise CatalogueError(f"{error}; the catalogue cannot be read as JSON") from None
    return parse(raw, str(path))


def current() -> dict[str, Hardware]:
    """The shipped catalogue with the user's over it; ``CatalogueError`` if the user's cannot be read."""
    from airflow.configuration import conf

    path = conf.get("sm_prefs", "instance_catalogue", fallback=None)
    if not path:
        return shipped()
    path = os.path.expanduser(path)
    try:
        users = user_files.parsed(Path(path), _read_users)
    except OSError as error:
        raise CatalogueError(f"[sm_prefs] instance_catalogue: {path}: {error.strerror or error}") from None
    return {**shipped(), **users}
