"""Scenario files: the capacity, quotas, timings, faults and service behaviours an emulator run plays.

Unknown keys are errors, so a typo never silently turns a shortage rehearsal into an ample one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

BUNDLED = (
    "ample",
    "gpu-shortage",
    "all-busy-then-free",
    "quota-short",
    "incompatible-fallback",
    "reserved-first",
)


class ScenarioError(ValueError):
    """A scenario file that cannot be played as written."""


@dataclass(frozen=True)
class CapacityEvent:
    at: float
    set_capacity: dict[str, int]


@dataclass(frozen=True)
class Failure:
    instance_type: str
    after_seconds: float
    reason: str


@dataclass(frozen=True)
class Faults:
    throttle_rate: float = 0.0
    error_rate: float = 0.0
    latency_ms: float = 0.0
    deny: tuple[str, ...] = ()  # operations answered with AccessDeniedException, as IAM would
    # Extra delay in milliseconds for the named operations only (e.g. hold a client between two calls).
    slow_operations: dict[str, float] = field(default_factory=dict)
    # The request is carried out but the reply is lost (a 500), as when a connection drops after the
    # service acted: the client's retry of a create then meets ResourceInUse.
    lost_reply_rate: float = 0.0


@dataclass(frozen=True)
class TrainingPlan:
    arn: str
    instance_type: str
    count: int
    start: float = 0.0
    end: float | None = None
    in_use: int = 0  # reserved instances already taken by work outside this emulator run


@dataclass(frozen=True)
class Behaviour:
    """Choices for the spec's open questions (§7); each documented in the README."""

    pending_timeout_status: str = "Stopped"
    default_max_pending_seconds: float | None = 172800.0
    processing_without_capacity: str = "accelerated-waits"
    echo_instance_count: bool = True
    reject_zero_count: bool = True


@dataclass(frozen=True)
class Scenario:
    name: str = "custom"
    description: str = ""
    speed: float = 1.0
    seed: int = 0
    region: str = "us-east-1"
    account_id: str = "123456789012"
    capacity: dict[str, int] = field(default_factory=dict)
    default_capacity: int = 0
    quotas: dict[str, int] = field(default_factory=dict)
    default_quota: int | None = None
    runtime_seconds: dict[str, float] = field(default_factory=lambda: {"default": 300.0})
    startup_seconds: float = 60.0
    download_seconds: float = 10.0
    upload_seconds: float = 10.0
    stop_seconds: float = 20.0
    events: tuple[CapacityEvent, ...] = ()
    failures: tuple[Failure, ...] = ()
    faults: Faults = Faults()
    training_plans: tuple[TrainingPlan, ...] = ()
    algorithms: dict[str, list[str]] = field(default_factory=dict)
    behaviour: Behaviour = Behaviour()

    def runtime_for(self, instance_type: str) -> float:
        return float(self.runtime_seconds.get(instance_type, self.runtime_seconds.get("default", 300.0)))

    def capacity_for(self, instance_type: str) -> int:
        return int(self.capacity.get(instance_type, self.default_capacity))

    def quota_for(self, instance_type: str) -> int | None:
        return self.quotas.get(instance_type, self.default_quota)


def _build(cls: type[Any], raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {type(raw).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        return cls(**raw)
    except TypeError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def _positive_map(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, int) and v >= 0 for v in raw.values()):
        raise ScenarioError(f"{where}: expected a mapping of instance type to a non-negative integer")
    return {str(k): int(v) for k, v in raw.items()}


def parse(raw: Any, where: str = "scenario") -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping at the top level")
    data = dict(raw)
    data["capacity"] = _positive_map(data.get("capacity"), f"{where}.capacity")
    data["quotas"] = _positive_map(data.get("quotas"), f"{where}.quotas")
    data["events"] = tuple(
        _build(CapacityEvent, item, f"{where}.events[{i}]") for i, item in enumerate(data.get("events") or [])
    )
    for i, event in enumerate(data["events"]):
        _positive_map(event.set_capacity, f"{where}.events[{i}].set_capacity")
    data["failures"] = tuple(
        _build(Failure, item, f"{where}.failures[{i}]") for i, item in enumerate(data.get("failures") or [])
    )
    data["training_plans"] = tuple(
        _build(TrainingPlan, item, f"{where}.training_plans[{i}]")
        for i, item in enumerate(data.get("training_plans") or [])
    )
    data["faults"] = parse_faults(data.get("faults") or {}, f"{where}.faults")
    data["behaviour"] = _build(Behaviour, data.get("behaviour") or {}, f"{where}.behaviour")
    runtimes = data.get("runtime_seconds")
    if runtimes is not None and not isinstance(runtimes, dict):
        raise ScenarioError(f"{where}.runtime_seconds: expected a mapping with 'default' and instance types")
    scenario: Scenario = _build(Scenario, data, where)
    _check(scenario, where)
    return scenario


def parse_faults(raw: Any, where: str = "faults") -> Faults:
    """Fault settings from a scenario file or from the control surface's ``POST /_emulator/faults``."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    data = dict(raw)
    data["deny"] = tuple(data.get("deny") or ())
    slow = data.get("slow_operations") or {}
    if not isinstance(slow, dict) or not all(isinstance(v, int | float) and v >= 0 for v in slow.values()):
        raise ScenarioError(f"{where}.slow_operations: expected a mapping of operation to milliseconds")
    data["slow_operations"] = {str(k): float(v) for k, v in slow.items()}
    faults: Faults = _build(Faults, data, where)
    for name in ("throttle_rate", "error_rate", "lost_reply_rate"):
        if not 0.0 <= getattr(faults, name) <= 1.0:
            raise ScenarioError(f"{where}.{name} must be between 0 and 1")
    if faults.throttle_rate + faults.error_rate > 1.0:
        raise ScenarioError(f"{where}: throttle_rate + error_rate must not exceed 1")
    return faults


def _check(scenario: Scenario, where: str) -> None:
    if scenario.speed <= 0:
        raise ScenarioError(f"{where}.speed must be positive")
    behaviour = scenario.behaviour
    if behaviour.pending_timeout_status not in ("Stopped", "Failed"):
        raise ScenarioError(f"{where}.behaviour.pending_timeout_status must be Stopped or Failed")
    if behaviour.processing_without_capacity not in ("accelerated-waits", "wait", "fail"):
        raise ScenarioError(f"{where}.behaviour.processing_without_capacity must be accelerated-waits, wait or fail")


def load(name_or_path: str) -> Scenario:
    """Load a bundled scenario by name (e.g. ``gpu-shortage``) or a YAML file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        text = path.read_text()
        where = str(path)
    elif name_or_path in BUNDLED:
        text = resources.files(__package__).joinpath("scenarios", f"{name_or_path}.yaml").read_text()
        where = f"{name_or_path}.yaml"
    else:
        raise ScenarioError(f"no scenario named {name_or_path!r}; bundled: {', '.join(BUNDLED)}")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{where}: not valid YAML: {exc}") from exc
    return parse(raw, where)
