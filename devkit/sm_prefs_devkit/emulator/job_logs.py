"""What a job writes to CloudWatch Logs as it runs: one stream per instance, lines at each phase.

Streams are named as SageMaker names them, ``<job name>/algo-<n>-<start epoch>``, and appear when the
job's instances start (a queued job has none). Every instance logs the phase changes; progress lines
(training epochs, processing progress) come from the first instance, as a launcher's rank 0 would. The
wording is the emulator's (docs/emulator.md, "Guesses"): a failure scenario can give the lines a failing job writes.
"""

from __future__ import annotations

from typing import Any

from sm_prefs_devkit.emulator.model import Job

PROGRESS_STEPS = 5
# [timestamp in ms, stream name, message]: how a job keeps its lines (and the state file stores them).
LogEvent = list[Any]


def open_streams(job: Job, at: float) -> None:
    """The instances are up: one stream each."""
    count = int((job.selected or {}).get("count") or 1)
    job.streams = [f"{job.name}/algo-{host}-{int(at)}" for host in range(1, count + 1)]


def write(job: Job, at: float, message: str, every_instance: bool = True) -> None:
    if not job.streams:
        return
    millis = int(at * 1000)
    for stream in job.streams if every_instance else job.streams[:1]:
        job.log.append([millis, stream, message])


def progress_line(kind_noun: str, step: int) -> str:
    if kind_noun == "Training":
        # A loss that falls as the epochs pass, the same on every run.
        loss = 2.0 / (step + 1)
        return f"epoch {step}/{PROGRESS_STEPS}: loss={loss:.4f}"
    return f"processed {step * 100 // PROGRESS_STEPS}% of the input"
