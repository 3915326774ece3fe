"""Why a job failed, in one of six causes, from what SageMaker said; the rules in one place (docs/report.md).

Only a ``hardware`` failure says anything about the configuration that ran the job: it is the one cause the
verdict, the advisor and certification hold against a fallback. The others are counted apart:

- ``configuration``: SageMaker's ``ClientError`` (the caller's own mistake: a bucket, a key, a permission, the
  input data, the request itself). Fix the request; any instance type would have failed the same way.
- ``hardware``: the container's failure names the instance (CUDA, NCCL, the driver, the GPU architecture, GPU
  memory), or the same task instance's job completed on another configuration after failing on this one.
- ``code``: any other failure of the container (``AlgorithmError`` and the like).
- ``capacity``: SageMaker found no capacity (``CapacityError``, or the job never got a configuration).
- ``service``: SageMaker's own error (``InternalServerError``); retry.
- ``unknown``: no reason given, or one these rules do not know.

SageMaker opens ``FailureReason`` with the kind of failure (``ClientError:``, ``AlgorithmError:``,
``CapacityError:``, ``InternalServerError:``); the container's own message follows. The hardware rules read the
whole text, for a container's message is where a CUDA or NCCL error shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

FailureCause = Literal["configuration", "hardware", "code", "capacity", "service", "unknown"]
CAUSES: tuple[FailureCause, ...] = ("configuration", "hardware", "code", "capacity", "service", "unknown")


@dataclass(frozen=True)
class Rule:
    cause: FailureCause
    name: str
    pattern: re.Pattern[str]


def _rule(cause: FailureCause, name: str, *alternatives: str) -> Rule:
    return Rule(cause, name, re.compile("|".join(alternatives), re.IGNORECASE))


# In order: the first rule that matches decides. SageMaker's own prefixes for capacity and its own errors come
# first; a ClientError is the caller's, whatever its text names; then the hardware a container's message names.
RULES: tuple[Rule, ...] = (
    _rule("capacity", "SageMaker's CapacityError", r"^\s*CapacityError\b"),
    _rule(
        "capacity",
        "no capacity for the instance type",
        r"InsufficientInstanceCapacity",
        r"Unable to provision requested ML compute capacity",
    ),
    _rule(
        "service",
        "SageMaker's internal error",
        r"^\s*(?:InternalServerError|InternalFailure|ServiceUnavailable)\b",
        r"^\s*We encountered an internal error",
    ),
    _rule("configuration", "SageMaker's ClientError (the request, its data or permissions)", r"^\s*ClientError\b"),
    _rule(
        "hardware",
        "GPU out of memory",
        r"CUDA out of memory",
        r"OutOfMemoryError: CUDA",
        r"CUBLAS_STATUS_ALLOC_FAILED",
        r"GPU (?:ran )?out of memory",
        r"out of memory on (?:the )?(?:GPU|device)",
    ),
    _rule(
        "hardware",
        "the GPU architecture or driver",
        r"no kernel image is available",
        r"not compatible with the current PyTorch installation",
        r"unsupported GPU architecture",
        r"sm_\d+ is not (?:compatible|supported)",
        r"driver version is insufficient",
        r"NVIDIA driver",
        r"cudaErrorNoDevice",
        r"no CUDA-capable device",
    ),
    _rule("hardware", "a CUDA error", r"\bCUDA error\b", r"\bcudaError\w*", r"CUDNN_STATUS_\w+", r"device-side assert"),
    _rule(
        "hardware",
        "an NCCL or interconnect error",
        r"\bNCCL (?:error|WARN)",
        r"\bnccl(?:System|Internal|UnhandledCuda|RemoteError)\w*",
        r"\bEFA\b.*\berror",
        r"NVLink",
    ),
    _rule(
        "hardware",
        "a fault of the instance",
        r"\bXid\b",
        r"\bECC error",
        r"uncorrectable ECC",
        r"GPU has fallen off the bus",
        r"instance (?:health|hardware) (?:check )?fail",
    ),
    _rule(
        "code",
        "the container's own failure",
        r"^\s*AlgorithmError\b",
        r"exit(?:ed)? (?:with )?(?:code|status) \d+",
        r"non-zero exit",
    ),
)


@dataclass(frozen=True)
class Diagnosis:
    """A failure's cause and the rule that decided it (``because``), e.g. ``hardware`` because "a CUDA error"."""

    cause: FailureCause
    because: str

    def as_json(self) -> dict[str, str]:
        return {"cause": self.cause, "because": self.because}


def diagnose(failure_reason: str | None, got_capacity: bool = True) -> Diagnosis:
    """The cause of a failure SageMaker explained with ``failure_reason``; ``got_capacity`` False: the job never
    got a configuration, which is a capacity failure whatever the text."""
    if not got_capacity and not (failure_reason or "").lstrip().startswith(("ClientError", "InternalServerError")):
        return Diagnosis("capacity", "the job never got a configuration")
    if not failure_reason:
        return Diagnosis("unknown", "no failure reason given")
    for rule in RULES:
        if rule.pattern.search(failure_reason):
            return Diagnosis(rule.cause, rule.name)
    return Diagnosis("unknown", "no rule matched the failure reason")


def of_job(outcome: str | None, failure_reason: str | None, got_capacity: bool) -> Diagnosis | None:
    """The diagnosis of a job that ended with ``outcome`` (``job_facts.outcome_of``), None for one that did not
    fail: it completed, or it was stopped with no reason given."""
    if outcome == "completed":
        return None
    if outcome == "no_capacity":
        return Diagnosis("capacity", "the job got no capacity in the time allowed")
    if not failure_reason and outcome != "failed_after_start":
        return None
    return diagnose(failure_reason, got_capacity)


def of_entry(entry: Mapping[str, Any]) -> FailureCause | None:
    """The cause of a recorded job's failure (a ledger entry), read from its outcome and failure reason."""
    found = of_job(entry.get("outcome"), entry.get("failure_reason"), entry.get("selected_instance_type") is not None)
    return None if found is None else found.cause


# -- across jobs: a configuration the same task instance succeeded without ------------------------------------------


def _task_instance(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    return (entry.get("dag_id"), entry.get("task_id"), entry.get("run_id"), entry.get("map_index"))


def _configuration(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    return (entry.get("selected_instance_type"), entry.get("selected_instance_count"))


def hardware_by_comparison(entries: Iterable[Mapping[str, Any]]) -> set[str]:
    """Jobs whose ``code`` failure counts as ``hardware``: the same task instance (same DAG run, same inputs)
    has a job that completed on another configuration. Their names."""
    given = list(entries)
    completed_on: dict[tuple[Any, ...], set[tuple[Any, Any]]] = {}
    for entry in given:
        if entry.get("outcome") == "completed":
            completed_on.setdefault(_task_instance(entry), set()).add(_configuration(entry))
    found = set()
    for entry in given:
        if cause_of(entry) != "code" or entry.get("run_id") is None:
            continue
        elsewhere = completed_on.get(_task_instance(entry), set()) - {_configuration(entry)}
        if elsewhere:
            found.add(str(entry.get("job_name")))
    return found


def cause_of(entry: Mapping[str, Any]) -> FailureCause | None:
    """The entry's recorded cause, or its cause read from its failure reason (older entries record none)."""
    recorded = entry.get("failure_cause")
    return recorded if recorded in CAUSES else of_entry(entry)


def causes(entries: Iterable[Mapping[str, Any]]) -> dict[str, FailureCause | None]:
    """Each job's cause by name, a ``code`` failure upgraded to ``hardware`` by ``hardware_by_comparison``."""
    given = list(entries)
    upgraded = hardware_by_comparison(given)
    return {str(e.get("job_name")): "hardware" if str(e.get("job_name")) in upgraded else cause_of(e) for e in given}
