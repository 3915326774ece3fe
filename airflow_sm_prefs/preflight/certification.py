"""The certification registry: per workload, the configurations benchmarked and passed with its production
image, data and launcher (``certification_dag`` writes it; the operators' ``certified=`` reads it).

A YAML file::

    format: 1
    workloads:
      nightly-eval:
        - instance_type: ml.p5.48xlarge
          instance_count: 1
          run_seconds: 1710
          throughput: {value: 1840.5, unit: samples/s}   # optional
          image_uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/eval:1.4
          image_digest: sha256:...                       # optional
          certified_at: "2026-11-30"
          certified_by: nightly_eval_certification / manual__2026-11-30T10:00:00+00:00
          notes: ""

Checked whole: a malformed registry is refused naming the file, the line and the field. Two certification runs
at once lose nothing: locally, writers take an exclusive lock on ``<file>.lock`` and replace the file
atomically; on object storage (``<[sm_prefs] storage>/certified.yaml``, S3), a write succeeds only if the
object is unchanged since it was read (``If-Match``, ``If-None-Match``), else it is read and merged again. An
entry of the same type and count is updated, never duplicated.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import math
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.request.preferences import INSTANCE_TYPE_SHAPE
from airflow_sm_prefs.storage import object_storage

FORMAT = 1
_Result = TypeVar("_Result")
Mode = Literal["strict", "warn", "off"]
MODES: tuple[Mode, ...] = ("strict", "warn", "off")


class RegistryError(SageMakerPreferencesError, ValueError):
    """A registry that cannot be read as written: names the file, the line and the field."""


class RegistryUnreachable(SageMakerPreferencesError, OSError):
    """The store holding the registry failed or did not answer: not an empty registry, and not the user's
    mistake either (a retry may find the store well)."""


@dataclass(frozen=True)
class Throughput:
    value: float
    unit: str


@dataclass(frozen=True)
class CertifiedConfiguration:
    instance_type: str
    instance_count: int
    run_seconds: float
    image_uri: str
    certified_at: str
    certified_by: str
    image_digest: str | None = None
    throughput: Throughput | None = None
    notes: str = ""

    @property
    def key(self) -> tuple[str, int]:
        return self.instance_type, self.instance_count

    def to_yaml(self) -> dict[str, Any]:
        raw = {k: v for k, v in asdict(self).items() if v not in (None, "")}
        return raw


Registry = dict[str, list[CertifiedConfiguration]]

_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {  # name: (types, required)
    "instance_type": (str, True),
    "instance_count": (int, True),
    "run_seconds": ((int, float), True),
    "image_uri": (str, True),
    "certified_at": ((str, dt.date), True),
    "certified_by": (str, True),
    "image_digest": (str, False),
    "throughput": (dict, False),
    "notes": (str, False),
}


def _line(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None else 1


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    """The YAML node under ``node`` at ``key`` (for the line number of a problem)."""
    found: yaml.Node | None = None
    if isinstance(node, yaml.MappingNode):
        found = next((value for name, value in node.value if name.value == key), None)
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        found = node.value[key]
    return found


def _refuse_duplicates(path: str, node: yaml.Node | None) -> None:
    """A key given twice: YAML keeps the last silently, and the next ``record()`` would drop the other."""
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, yaml.Node] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name is not None and name in first:
                raise RegistryError(
                    f"{path}, lines {_line(first[name])} and {_line(key)}: {name!r} is given twice; keep one"
                )
            if name is not None:
                first[name] = key
            _refuse_duplicates(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicates(path, item)


def _refuse_bad_dates(path: str, node: yaml.Node | None) -> None:
    """A date YAML recognises by its shape but that does not exist (2026-13-45), named with its line."""
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:timestamp":
        try:
            yaml.SafeLoader("").construct_yaml_timestamp(node)
        except ValueError as error:
            raise RegistryError(f"{path}, line {_line(node)}: {node.value!r} is not a date ({error})") from None
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            _refuse_bad_dates(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_bad_dates(path, item)


def _refuse(path: str, node: yaml.Node | None, where: str, problem: str) -> RegistryError:
    return RegistryError(f"{path}, line {_line(node)}: {where}: {problem}")


# A registry is five levels deep (workloads, name, list, entry, preferences); composing a document nested
# thousands deep recurses in C, which on Python 3.12 (MWAA's) crashes the process instead of raising.
MAX_NESTING = 16


def _within_nesting(loader: yaml.SafeLoader, path: str) -> None:
    """Walk the document's events (the parser keeps its own stack, so this never recurses) and refuse it
    once collections nest past :data:`MAX_NESTING`."""
    depth = 0
    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_NESTING:
                raise RegistryError(f"{path}: nested more than {MAX_NESTING} deep, too deep to be a registry")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def is_workload_name(name: Any) -> bool:
    """Whether ``name`` can name a workload of the registry: text with more than blanks. The reader, the operators'
    ``workload=`` and ``certification_dag`` judge by this one rule, so nothing writes a registry no task can read."""
    return isinstance(name, str) and bool(name.strip())


def parse(text: str, path: str) -> Registry:
    # libyaml's loader where PyYAML was built with it (the pure-Python scanner takes a minute over 20,000
    # entries), composed once: the nodes give the checks their line numbers, and the values come from them.
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        _within_nesting(loader, path)
    except yaml.YAMLError:
        pass  # composing below reports it with its line
    finally:
        loader.dispose()
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        _refuse_duplicates(path, root)
        _refuse_bad_dates(path, root)
        raw = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise RegistryError(f"{path}{line}: not valid YAML ({getattr(error, 'problem', error)})") from None
    except RecursionError:
        raise RegistryError(f"{path}: nested too deep to be a registry") from None
    finally:
        loader.dispose()
    if raw is None:
        return {}
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise _refuse(path, root, "format", f"expected a mapping with format: {FORMAT}")
    unknown = sorted(set(raw) - {"format", "workloads"})
    if unknown:
        raise _refuse(path, _child(root, unknown[0]), unknown[0], "unknown key (format and workloads only)")
    workloads = raw.get("workloads") or {}
    workloads_node = _child(root, "workloads")
    if not isinstance(workloads, dict):
        raise _refuse(path, workloads_node, "workloads", "expected a mapping of workload name to entries")
    registry: Registry = {}
    for workload, entries in workloads.items():
        node = _child(workloads_node, workload)
        if not is_workload_name(workload):
            raise _refuse(path, node, "workloads", f"a workload name must be text, got {workload!r:.60}")
        if not isinstance(entries, list):
            raise _refuse(path, node, f"workloads.{workload}", "expected a list of certified configurations")
        registry[workload] = [
            _entry(entry, f"workloads.{workload}[{index}]", path, _child(node, index))
            for index, entry in enumerate(entries)
        ]
        counted = Counter(entry.key for entry in registry[workload])
        duplicates = sorted(key for key, times in counted.items() if times > 1)
        if duplicates:
            raise _refuse(
                path, node, f"workloads.{workload}", f"{duplicates[0][1]} x {duplicates[0][0]} is listed twice"
            )
    return registry


def _entry(raw: Any, where: str, path: str, node: yaml.Node | None) -> CertifiedConfiguration:
    if not isinstance(raw, dict):
        raise _refuse(path, node, where, "expected a mapping")
    for key in raw:
        if key not in _FIELDS:
            raise _refuse(path, _child(node, key), f"{where}.{key}", f"unknown field; known: {', '.join(_FIELDS)}")
    for key, (types, required) in _FIELDS.items():
        value = raw.get(key)
        if value is None:
            if required:
                raise _refuse(path, node, f"{where}.{key}", "missing")
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            raise _refuse(path, _child(node, key), f"{where}.{key}", f"of the wrong type ({type(value).__name__})")
    if not INSTANCE_TYPE_SHAPE.fullmatch(raw["instance_type"]):  # as a preference list's entry is judged
        raise _refuse(
            path, _child(node, "instance_type"), f"{where}.instance_type", "an instance type such as ml.p5.48xlarge"
        )
    if raw["instance_count"] < 1 or not 0 < raw["run_seconds"] < math.inf:
        field = "instance_count" if raw["instance_count"] < 1 else "run_seconds"
        raise _refuse(path, _child(node, field), f"{where}.{field}", "must be a positive, finite number")
    throughput = None
    if raw.get("throughput") is not None:
        value, unit = raw["throughput"].get("value"), raw["throughput"].get("unit")
        number = not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < math.inf
        if not number or not isinstance(unit, str) or not unit:
            raise _refuse(
                path, _child(node, "throughput"), f"{where}.throughput", "needs a positive, finite value and a unit"
            )
        throughput = Throughput(float(value), unit)
    return CertifiedConfiguration(
        instance_type=raw["instance_type"],
        instance_count=raw["instance_count"],
        run_seconds=float(raw["run_seconds"]),
        image_uri=raw["image_uri"],
        certified_at=str(raw["certified_at"]),
        certified_by=raw["certified_by"],
        image_digest=raw.get("image_digest"),
        throughput=throughput,
        notes=raw.get("notes") or "",
    )


MAX_REGISTRY_BYTES = 16 << 20  # a workload's certified configurations are a few hundred bytes each


def read(path: Any) -> Registry:
    """The registry at ``path`` (a local path, a URL or an ``ObjectStoragePath``); an empty one if the file does
    not exist yet."""
    from airflow_sm_prefs.storage import untrusted_files

    location = _place(path) if isinstance(path, str) or object_storage.is_host_path(path) else path

    def text_of() -> str | None:
        if not location.exists() and not location.is_symlink():
            return None
        try:
            return untrusted_files.decode(untrusted_files.read_bytes(location, MAX_REGISTRY_BYTES), location)
        except untrusted_files.UntrustedFileError as error:
            raise RegistryError(str(error)) from None

    text = text_of() if object_storage.on_local_disk(location) else _on_the_store(location, "reading", text_of)
    return parse(text, str(location)) if text is not None else {}


def _on_the_store(location: Any, doing: str, operation: Callable[[], _Result]) -> _Result:
    """``operation()`` within ``[sm_prefs] storage_timeout``; a failing store is ``RegistryUnreachable``."""
    from airflow_sm_prefs.storage import bounded, store_errors

    shown = object_storage.shown(location)
    try:
        return bounded.within(f"{doing} the certification registry {shown}", operation)
    except (RegistryError, RegistryUnreachable):
        raise  # already said (a write reads the registry first)
    except Exception as error:
        problem = store_errors.explained(error)
        if problem is None:
            raise
        raise RegistryUnreachable(problem.line(f"the store holding the certification registry {shown}")) from error


def registry_path(explicit: str | None) -> str:
    """The operator's ``certification_registry`` if given, else ``[sm_prefs] certification_registry``, else
    ``<[sm_prefs] storage>/certified.yaml``, else ``$AIRFLOW_HOME/sm_prefs/certified.yaml``: a local path or a
    URL, as text (nothing is opened, so a DAG file's parse makes no call)."""
    url, _ = object_storage.shared_url("certification_registry", "certified.yaml", explicit)
    return url if is_remote(url) else os.path.expanduser(url)


def is_remote(path: str | Path) -> bool:
    return not object_storage.is_local(str(path))


def _place(path: str | Path) -> Any:
    return object_storage.place(str(path), object_storage.setting("storage_conn_id"), "the certification registry")


def certified_for(registry: Registry, workload: str, instance_type: str, count: int) -> CertifiedConfiguration | None:
    return next((c for c in registry.get(workload, []) if c.key == (instance_type, count)), None)


# -- writing ---------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


MAX_WRITE_ATTEMPTS = 20  # a conditional write loses only to another writer's success; 20 in a row is not contention


def record(path: str | Path, workload: str, passed: Sequence[CertifiedConfiguration]) -> Registry:
    """Add or update ``passed`` under ``workload`` with no update lost to a concurrent writer: locally under the
    file's lock, replacing the file atomically (a registry behind a symlink is written where the link points,
    and the link is kept); on object storage by a write that succeeds only if the object is unchanged since it
    was read, read again and merged again otherwise."""
    if is_remote(path):
        location = _place(path)
        return _on_the_store(location, "writing", lambda: _record_on_object_storage(location, workload, passed))
    location = Path(os.path.realpath(path))
    with _locked(location):
        registry, text = _merged(read(location), workload, passed, str(location))
        handle, temporary = tempfile.mkstemp(dir=location.parent, prefix=f".{location.name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, location)
    return registry


def _record_on_object_storage(location: Any, workload: str, passed: Sequence[CertifiedConfiguration]) -> Registry:
    for _ in range(MAX_WRITE_ATTEMPTS):
        # The version first: content read after it is that version or newer, and a newer one fails the write.
        version = object_storage.current_version(location)
        registry, text = _merged(read(location) if version else {}, workload, passed, str(location))
        try:
            object_storage.write_if_unchanged(location, text.encode("utf-8"), version)
            return registry
        except object_storage.ChangedMeanwhile:
            continue
    raise RegistryError(f"{location}: changed by other writers {MAX_WRITE_ATTEMPTS} times in a row; nothing written")


def _merged(
    registry: Registry, workload: str, passed: Sequence[CertifiedConfiguration], where: str
) -> tuple[Registry, str]:
    """The registry with ``passed`` added to or updated in ``workload``, and its text, checked as readers will."""
    entries = {entry.key: entry for entry in registry.get(workload, [])}
    for entry in passed:
        entries[entry.key] = entry
    registry = {**registry, workload: sorted(entries.values(), key=lambda e: (e.instance_type, e.instance_count))}
    document = {
        "format": FORMAT,
        "workloads": {name: [e.to_yaml() for e in listed] for name, listed in sorted(registry.items())},
    }
    text = yaml.safe_dump(document, sort_keys=False)
    parse(text, where)  # never write what the readers would refuse
    return registry, text


# -- what the operators ask ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certification:
    """An operator's ``workload`` / ``certified`` / ``certification_registry``, judged."""

    workload: str | None
    mode: Mode
    registry: str | None

    @classmethod
    def judged(cls, workload: Any, certified: Any, registry: Any) -> Certification:
        from airflow_sm_prefs.request.preferences import RequestValidationError

        problems = []
        if workload is not None and not is_workload_name(workload):
            problems.append(f"workload must be a workload name of the certification registry, got {workload!r:.60}")
        mode: Any = certified if certified is not None else ("warn" if workload else "off")
        if mode not in MODES:
            problems.append(f"certified must be 'strict', 'warn' or 'off', got {certified!r:.40}")
        elif mode != "off" and not workload:
            problems.append(f"certified={mode!r} needs workload= (the registry's name for this job)")
        if registry is not None and not isinstance(registry, str):
            problems.append(f"certification_registry must be a path or a URL, got {type(registry).__name__}")
        path = registry_path(registry) if not problems else None
        if problems:
            raise RequestValidationError(problems)
        return cls(workload, mode, path)

    @property
    def checked_at_parse(self) -> bool:
        """A local registry is read when the DAG file is parsed; a remote one only before a job is created, so
        that parsing (every 30 s, on the DAG processor) makes no network call."""
        return self.registry is not None and not is_remote(self.registry)

    def uncertified(self, entries: Sequence[tuple[str, int, str]]) -> list[str]:
        """Of ``(type, count, label)`` entries, those the registry does not certify for the workload."""
        if self.mode == "off" or self.workload is None or self.registry is None:
            return []
        registry = read(self.registry)
        known = ", ".join(f"{c.instance_count} x {c.instance_type}" for c in registry.get(self.workload, [])) or (
            "none yet: run the workload's certification first"
        )
        return [
            f"{label}: not certified for workload {self.workload!r} in {self.registry} (certified: {known})"
            for instance_type, count, label in entries
            if certified_for(registry, self.workload, instance_type, count) is None
        ]

    def certified_run_seconds(self, instance_type: str | None, count: int | None) -> float | None:
        if self.workload is None or self.registry is None or instance_type is None or not count:
            return None
        try:
            found = certified_for(read(self.registry), self.workload, instance_type, count)
        except RegistryError:
            return None
        return found.run_seconds if found else None
