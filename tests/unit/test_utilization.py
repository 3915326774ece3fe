"""A job's utilization from what its hosts published: per device, pooled over hosts and minutes."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.facts import utilization
from airflow_sm_prefs.reference.instance_catalogue import Hardware


def hardware(gpus: int, vcpus: int) -> Hardware:
    return Hardware("ml.test", vcpus, 64.0, "x86_64", "gpu" if gpus else None, None, gpus, None, None, 0, "test")


def test_figures_are_per_device_and_pooled_over_hosts_and_minutes():
    # Two hosts of 8 GPUs: CloudWatch reports percent x 8. Per GPU: host 1 at 90, 80; host 2 at 100, 70.
    values = {
        "GPUUtilization": [[720.0, 640.0], [800.0, 560.0]],
        "GPUMemoryUtilization": [[400.0], [480.0]],
        "CPUUtilization": [[960.0, 1920.0], []],  # 96 vCPUs: 10 % and 20 %
        "MemoryUtilization": [[50.0, 55.0], [60.0, 65.0]],
    }
    found = utilization.summarize(values, hardware(gpus=8, vcpus=96))
    assert found.as_json() == {
        "gpu": {"mean": 85.0, "p90": 100.0},  # (90 + 80 + 100 + 70) / 4; nearest rank of four is the top one
        "gpu_memory": {"mean": 55.0, "p90": 60.0},
        "cpu": {"mean": 15.0, "p90": 20.0},
        "memory": {"mean": 57.5, "p90": 65.0},
    }


def test_the_p90_is_the_nearest_rank_and_the_mean_is_rounded_to_a_tenth():
    assert utilization.figure([float(v) for v in range(1, 11)]) == utilization.Figure(5.5, 9.0)
    assert utilization.figure([1.0, 2.0, 2.0]) == utilization.Figure(1.7, 2.0)
    assert utilization.figure([]) is None


def test_what_was_not_published_or_cannot_be_divided_is_unknown_never_zero():
    cpu_only = utilization.summarize({"CPUUtilization": [[800.0]], "MemoryUtilization": [[40.0]]}, hardware(0, 16))
    assert cpu_only.as_json() == {"gpu": None, "gpu_memory": None, "cpu": {"mean": 50.0, "p90": 50.0},
                                  "memory": {"mean": 40.0, "p90": 40.0}}  # fmt: skip
    # A type the catalogue does not know: its device counts are unknown, so only memory (a share already) stands.
    unknown_type = utilization.summarize({"GPUUtilization": [[400.0]], "MemoryUtilization": [[30.0]]}, None)
    assert unknown_type.figures["gpu"] is None and unknown_type.figures["memory"] == utilization.Figure(30.0, 30.0)
    nothing = utilization.summarize({name: [[], []] for name in utilization.METRICS.values()}, hardware(8, 96))
    assert not nothing.known


def test_a_recorded_utilization_reads_back_and_a_misshapen_one_is_refused():
    found = utilization.summarize({"GPUUtilization": [[400.0, 480.0]]}, hardware(8, 96))
    assert utilization.from_json(found.as_json()) == found
    assert utilization.from_json(None) is None
    assert utilization.is_recorded_shape(found.as_json()) and utilization.is_recorded_shape(None)


@pytest.mark.parametrize(
    "raw",
    [
        "busy",
        {"fan": {"mean": 1.0, "p90": 2.0}},
        {"gpu": {"mean": -1.0, "p90": 2.0}},
        {"gpu": {"mean": 1.0}},
        {"gpu": {"mean": True, "p90": 2.0}},
        {"gpu": {"mean": float("inf"), "p90": 2.0}},
        {"gpu": [1.0, 2.0]},
    ],
)
def test_misshapen_recorded_utilizations(raw):
    assert not utilization.is_recorded_shape(raw)
