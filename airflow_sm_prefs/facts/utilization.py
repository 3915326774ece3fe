"""How well a job used its hardware: each instance metric's mean and p90 over its hosts and minutes, as a share
of one device.

CloudWatch reports a host's GPU figures as a percent x its GPUs and CPU as a percent x its vCPUs
(``sagemaker/host_metrics.py``); dividing by the instance catalogue's counts makes 8 GPUs at 91 % read 91 %, so
two configurations of different sizes compare. A metric the job did not publish (a CPU instance has no GPU
figures), or one whose device count the catalogue does not know, is None: unknown, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.reference.instance_catalogue import Hardware
from airflow_sm_prefs.sagemaker.host_metrics import HostValues

# The record's and the ledger's names for each metric, and the CloudWatch metric each comes from.
METRICS = {
    "gpu": "GPUUtilization",
    "gpu_memory": "GPUMemoryUtilization",
    "cpu": "CPUUtilization",
    "memory": "MemoryUtilization",
}
STATISTICS = ("mean", "p90")


@dataclass(frozen=True)
class Figure:
    mean: float
    p90: float


@dataclass(frozen=True)
class Utilization:
    """Per metric (``METRICS``), its figure in percent of one device, or None where unknown."""

    figures: Mapping[str, Figure | None]

    def as_json(self) -> dict[str, dict[str, float] | None]:
        return {
            name: None if (figure := self.figures.get(name)) is None else {"mean": figure.mean, "p90": figure.p90}
            for name in METRICS
        }

    @property
    def known(self) -> bool:
        return any(figure is not None for figure in self.figures.values())


def _devices(metric: str, hardware: Hardware | None) -> int | None:
    """How many devices a host's figure of ``metric`` adds up; None when the catalogue cannot say."""
    if metric == "MemoryUtilization":
        return 1
    if hardware is None:
        return None
    if metric == "CPUUtilization":
        return hardware.vcpus or None
    return hardware.accelerators if hardware.accelerator == "gpu" and hardware.accelerators else None


def figure(values: list[float]) -> Figure | None:
    """Mean and nearest-rank p90, to one decimal; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return Figure(round(sum(ordered) / len(ordered), 1), round(p90, 1))


def summarize(values: HostValues, hardware: Hardware | None) -> Utilization:
    """One job's utilization from what its hosts published, pooled over hosts and minutes."""
    figures: dict[str, Figure | None] = {}
    for name, metric in METRICS.items():
        devices = _devices(metric, hardware)
        pooled = [value / devices for host in values.get(metric, []) for value in host] if devices else []
        figures[name] = figure(pooled)
    return Utilization(figures)


def from_json(raw: Any) -> Utilization | None:
    """A recorded utilization (``as_json``) read back; None for none recorded."""
    if not isinstance(raw, Mapping):
        return None
    figures = {
        name: Figure(float(value["mean"]), float(value["p90"])) if isinstance(value, Mapping) else None
        for name, value in raw.items()
        if name in METRICS
    }
    return Utilization(figures)


def is_recorded_shape(raw: Any) -> bool:
    """Whether a ledger's ``utilization`` is one ``as_json`` writes: known metrics, each null or both statistics
    as finite, non-negative numbers."""
    if raw is None:
        return True
    if not isinstance(raw, dict) or not set(raw) <= set(METRICS):
        return False
    return all(
        value is None
        or (
            isinstance(value, dict)
            and set(value) == set(STATISTICS)
            and all(
                isinstance(number, int | float) and not isinstance(number, bool) and 0 <= number < math.inf
                for number in value.values()
            )
        )
        for value in raw.values()
    )
