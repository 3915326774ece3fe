"""``requires=``: the hardware a workload needs, checked against the instance catalogue for every preference.

SageMaker selects by capacity only; a fallback without the GPU memory, architecture or EFA the container
needs is launched anyway and fails (or runs wrong) later. This check names each such entry first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from airflow_sm_prefs.preflight.check import Arguments, EntryCheck, Run
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.preflight.guardrails import OnViolation, apply
from airflow_sm_prefs.reference.instance_catalogue import ACCELERATORS, Hardware
from airflow_sm_prefs.request.preferences import RequestValidationError

if TYPE_CHECKING:
    from airflow_sm_prefs.request.jobs import JobKind


@dataclass(frozen=True)
class InstanceRequirements:
    """What every configuration in the list must offer (all optional; per job, not per instance, where said).

    :param min_gpu_memory_gib: memory per GPU (or per accelerator), at least.
    :param gpu_architectures: GPU architectures the container is built for, e.g. ``["hopper", "ampere"]``.
    :param min_total_gpus: accelerators across the job's instances (per instance x count), at least.
    :param efa: the type must (True) have Elastic Fabric Adapter interfaces.
    :param accelerator: ``"gpu"``, ``"trainium"``, ``"inferentia"``, or ``"none"`` for a CPU-only workload.
    :param min_vcpus: vCPUs per instance, at least.
    :param min_memory_gib: memory per instance, at least.
    :param cpu_architectures: e.g. ``["x86_64"]``.
    """

    min_gpu_memory_gib: float | None = None
    gpu_architectures: tuple[str, ...] | None = None
    min_total_gpus: int | None = None
    efa: bool | None = None
    accelerator: str | None = None
    min_vcpus: int | None = None
    min_memory_gib: float | None = None
    cpu_architectures: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v is not None}


def judged(value: Any) -> InstanceRequirements | None:
    """``requires=`` as given (an ``InstanceRequirements``, a dict of its fields, or None), checked."""
    if value is None or isinstance(value, InstanceRequirements):
        return _checked(value) if value is not None else None
    if not isinstance(value, Mapping):
        raise RequestValidationError(
            [f"requires must be an InstanceRequirements or a dict of its fields, got {type(value).__name__}"]
        )
    known = {field.name for field in fields(InstanceRequirements)}
    unknown = sorted(str(key) for key in value if key not in known)
    if unknown:
        raise RequestValidationError(
            [f"requires: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"]
        )
    given = dict(value)
    for key in ("gpu_architectures", "cpu_architectures"):
        if isinstance(given.get(key), list):
            given[key] = tuple(given[key])
    return _checked(InstanceRequirements(**given))


def _checked(requires: InstanceRequirements) -> InstanceRequirements:
    problems = []
    for key in ("min_gpu_memory_gib", "min_memory_gib"):
        value = getattr(requires, key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0
        ):
            problems.append(f"requires.{key} must be a positive number of GiB, got {value!r:.40}")
    for key in ("min_total_gpus", "min_vcpus"):
        value = getattr(requires, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            problems.append(f"requires.{key} must be a positive integer, got {value!r:.40}")
    for key in ("gpu_architectures", "cpu_architectures"):
        value = getattr(requires, key)
        if value is not None and (
            not isinstance(value, tuple) or not value or not all(isinstance(v, str) and v for v in value)
        ):
            problems.append(f"requires.{key} must be a non-empty list of names, got {value!r:.60}")
    if requires.efa is not None and not isinstance(requires.efa, bool):
        problems.append(f"requires.efa must be True or False, got {requires.efa!r:.40}")
    if requires.accelerator is not None and requires.accelerator not in (*ACCELERATORS, "none"):
        problems.append(
            f"requires.accelerator must be one of gpu, trainium, inferentia, none; got {requires.accelerator!r:.40}"
        )
    if problems:
        raise RequestValidationError(problems)
    return requires


def shortfalls(requires: InstanceRequirements, hardware: Hardware, count: int) -> list[str]:
    """What ``hardware`` x ``count`` lacks; empty when it meets every requirement."""
    missing = []
    wanted_accelerator = requires.accelerator
    if wanted_accelerator == "none" and hardware.accelerator is not None:
        missing.append(
            f"has {hardware.accelerators} {hardware.accelerator_model} accelerator(s), a CPU-only workload was asked"
        )
    elif wanted_accelerator not in (None, "none") and hardware.accelerator != wanted_accelerator:
        missing.append(f"has no {wanted_accelerator} ({hardware.accelerator or 'no accelerator'})")
    if requires.min_gpu_memory_gib is not None:
        per = hardware.accelerator_memory_gib
        if per is None or per < requires.min_gpu_memory_gib:
            shown = "unknown" if per is None else f"{per:g} GiB"
            missing.append(f"{shown} per accelerator, below min_gpu_memory_gib={requires.min_gpu_memory_gib:g}")
    if requires.gpu_architectures is not None and hardware.gpu_architecture not in requires.gpu_architectures:
        allowed = ", ".join(requires.gpu_architectures)
        missing.append(f"GPU architecture {hardware.gpu_architecture or 'none'} is not one of {allowed}")
    if requires.min_total_gpus is not None and hardware.accelerators * count < requires.min_total_gpus:
        missing.append(
            f"{hardware.accelerators} x {count} = {hardware.accelerators * count} accelerators, below "
            f"min_total_gpus={requires.min_total_gpus}"
        )
    if requires.efa and hardware.efa_interfaces == 0:
        missing.append("no EFA (Elastic Fabric Adapter) support")
    if requires.min_vcpus is not None and hardware.vcpus < requires.min_vcpus:
        missing.append(f"{hardware.vcpus} vCPUs, below min_vcpus={requires.min_vcpus}")
    if requires.min_memory_gib is not None and hardware.memory_gib < requires.min_memory_gib:
        missing.append(f"{hardware.memory_gib:g} GiB of memory, below min_memory_gib={requires.min_memory_gib:g}")
    if requires.cpu_architectures is not None and hardware.cpu_architecture not in requires.cpu_architectures:
        missing.append(
            f"CPU architecture {hardware.cpu_architecture} is not one of {', '.join(requires.cpu_architectures)}"
        )
    return missing


def violations(
    requires: InstanceRequirements, entries: Iterable[tuple[int, str, int, str]], catalogue: Mapping[str, Hardware]
) -> dict[int, str]:
    """rank -> reason for each entry ``(rank, instance type, count, label)`` that does not meet ``requires``."""
    found = {}
    for rank, instance_type, count, label in entries:
        hardware = catalogue.get(instance_type)
        if hardware is None:
            found[rank] = (
                f"{label}: {instance_type} is not in the instance catalogue, so requires= cannot be checked; add it "
                "to your catalogue file ([sm_prefs] instance_catalogue)"
            )
            continue
        missing = shortfalls(requires, hardware, count)
        if missing:
            found[rank] = f"{label}: {'; '.join(missing)} (requires={requires.as_dict()})"
    return found


# -- the check: entries whose type lacks what ``requires`` asks ---------------------------------------------


def requirement_violations(kind: JobKind, request: Mapping[str, Any], requires: InstanceRequirements) -> dict[int, str]:
    """Entries whose type lacks what ``requires`` asks, by the instance catalogue."""
    from airflow_sm_prefs.reference import instance_catalogue

    listed = [(entry.rank, entry.instance_type, entry.count, entry.label) for entry in entries(kind, request)]
    try:
        catalogue = instance_catalogue.current()
    except instance_catalogue.CatalogueError as error:
        raise RequestValidationError([str(error)]) from None
    return violations(requires, listed, catalogue)


@dataclass(frozen=True)
class MeetsRequirements(EntryCheck):
    """Entries whose type lacks the hardware ``requires=`` asks; a static list is judged at parse time too."""

    arguments = ("requires",)

    requires: InstanceRequirements

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> MeetsRequirements | None:
        requires = judged(given.get("requires"))
        return cls(requires) if requires is not None else None

    def at_parse(self, kind: JobKind, request: dict[str, Any], on_violation: OnViolation) -> None:
        # A static list that cannot meet requires= fails the DAG import; with "drop", the run decides.
        if on_violation == "fail":
            apply(kind, request, requirement_violations(kind, request, self.requires), "fail")

    def violations(self, run: Run, request: Mapping[str, Any]) -> dict[int, str]:
        return requirement_violations(run.kind, request, self.requires)
