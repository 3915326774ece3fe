"""What the emulated service remembers about one job (persisted to the state file as is)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sm_prefs_devkit.emulator.service_rules import Candidate, is_accelerated


@dataclass
class Job:
    kind: str
    name: str
    arn: str
    request: dict[str, Any]
    candidates: list[dict[str, Any]]
    uses_preferences: bool
    created: float
    seq: int
    status: str = "InProgress"
    secondary: str | None = None
    last_modified: float = 0.0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    selected: dict[str, Any] | None = None
    start_time: float | None = None
    end_time: float | None = None
    failure_reason: str | None = None
    exit_message: str | None = None
    pending: bool = False
    place_after: float = 0.0  # a selection delay (Scenario.selection_delay_seconds): not placed before this time
    epoch: int = 0
    tags: list[dict[str, str]] = field(default_factory=list)
    region: str = ""  # the Region whose endpoint the create was signed for (jobs are per account and Region)
    streams: list[str] = field(default_factory=list)  # CloudWatch log streams, one per instance, once started
    log: list[list[Any]] = field(default_factory=list)  # [ms, stream, message] in the order written

    @property
    def key(self) -> str:
        return job_key(self.kind, self.name, self.region)

    def candidate_objects(self) -> list[Candidate]:
        return [Candidate(**c) for c in self.candidates]

    @property
    def accelerated(self) -> bool:
        return any(is_accelerated(c["instance_type"]) for c in self.candidates)

    @property
    def plan_arn(self) -> str | None:
        """The training plan the job runs on (once placed) or asked for at the job level."""
        if self.selected is not None:
            return self.selected.get("plan_arn")
        resources = self.request.get("ResourceConfig") or {}
        return resources.get("TrainingPlanArn")

    @property
    def candidate_types(self) -> str:
        return ", ".join(c["instance_type"] for c in self.candidates)


def job_key(kind: str, name: str, region: str) -> str:
    # SageMaker job names are unique per account and Region regardless of case.
    return f"{region}/{kind}:{name.lower()}"
