"""The emulator's kind table: everything that differs between a training and a processing job.

The engine, the responses and the protocol read this table and never branch on a kind's name. It is the
service's own table, deliberately separate from the client's ``airflow_sm_prefs.request.jobs``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sm_prefs_devkit.emulator import job_data, responses, service_rules
from sm_prefs_devkit.emulator.model import Job
from sm_prefs_devkit.emulator.scenario import Behaviour, Scenario
from sm_prefs_devkit.emulator.service_rules import Candidate

Action = Literal["Create", "Describe", "Stop", "List"]
ACTIONS: tuple[Action, ...] = ("Create", "Describe", "Stop", "List")

# (seconds after the job started, secondary status, status message)
Milestone = tuple[float, str, str]


@dataclass(frozen=True)
class EmulatedKind:
    name: str
    noun: str
    resources_path: tuple[str, ...]
    image_path: tuple[str, ...]
    candidates: Callable[[dict[str, Any], Scenario, service_rules.PlanLookup], tuple[list[Candidate], bool]]
    # "wait", "fail" or "accelerated-waits": what a create does when no listed type has capacity now.
    capacity_rule: Callable[[Behaviour], str]
    records_secondary_status: bool
    times_out_pending: bool
    # ListTrainingJobs documents a quirk: with MaxResults set, StatusEquals filters after taking the page.
    status_filter_after_paging: bool
    # The milestones between start and finish, and when the job finishes (seconds after it started), for a
    # workload that runs ``runtime`` seconds (``Scenario.runtime_for``).
    timeline: Callable[[Scenario, float], tuple[list[Milestone], float]]
    # When the workload itself runs (seconds after the job started): where its progress lines go.
    run_window: Callable[[Scenario, float], tuple[float, float]]
    log_group: str
    # The message a Describe of a job that does not exist answers with (the two APIs word it differently).
    not_found: Callable[[str], str]
    describe_extras: Callable[[Job, dict[str, Any]], None]
    # What the job reads from S3 when it starts and writes when it ends (``job_data.py``).
    inputs: job_data.InputsOf
    outputs: job_data.OutputsOf
    summary_extras: Callable[[Job, dict[str, Any]], None]

    @property
    def name_field(self) -> str:
        return f"{self.noun}JobName"

    @property
    def arn_field(self) -> str:
        return f"{self.noun}JobArn"

    @property
    def status_field(self) -> str:
        return f"{self.noun}JobStatus"

    @property
    def start_field(self) -> str:
        return f"{self.noun}StartTime"

    @property
    def end_field(self) -> str:
        return f"{self.noun}EndTime"

    @property
    def summaries_field(self) -> str:
        return f"{self.noun}JobSummaries"

    def operation(self, action: Action) -> str:
        return f"{action}{self.noun}Job" + ("s" if action == "List" else "")

    def resources(self, body: dict[str, Any]) -> dict[str, Any]:
        node = body
        for key in self.resources_path:
            node = node[key]
        return node

    def image(self, request: dict[str, Any]) -> str | None:
        node: Any = request
        for key in self.image_path:
            node = (node or {}).get(key)
        return node if isinstance(node, str) else None

    def waits_without_capacity(self, behaviour: Behaviour, accelerated: bool) -> bool:
        rule = self.capacity_rule(behaviour)
        return rule == "wait" or (rule == "accelerated-waits" and accelerated)


def _training_timeline(scenario: Scenario, runtime: float) -> tuple[list[Milestone], float]:
    training = scenario.download_seconds
    uploading = training + runtime
    milestones = [
        (training, "Training", "Training image download completed. Training in progress."),
        (uploading, "Uploading", "Uploading generated training model"),
    ]
    return milestones, uploading + scenario.upload_seconds


def _training_run_window(scenario: Scenario, runtime: float) -> tuple[float, float]:
    return scenario.download_seconds, scenario.download_seconds + runtime


def _processing_run_window(scenario: Scenario, runtime: float) -> tuple[float, float]:
    return 0.0, runtime


def _processing_timeline(scenario: Scenario, runtime: float) -> tuple[list[Milestone], float]:
    return [], runtime


TRAINING = EmulatedKind(
    name="training",
    noun="Training",
    resources_path=("ResourceConfig",),
    image_path=("AlgorithmSpecification", "TrainingImage"),
    candidates=service_rules.training_candidates,
    # The Training guide: a list with an accelerated type waits for capacity; a CPU-only list fails at once.
    capacity_rule=lambda behaviour: "accelerated-waits",
    records_secondary_status=True,
    times_out_pending=True,
    status_filter_after_paging=True,
    timeline=_training_timeline,
    run_window=_training_run_window,
    log_group="/aws/sagemaker/TrainingJobs",
    not_found=lambda name: "Requested resource not found.",
    describe_extras=responses.training_describe_extras,
    inputs=job_data.training_inputs,
    outputs=job_data.training_outputs,
    summary_extras=responses.training_summary_extras,
)

PROCESSING = EmulatedKind(
    name="processing",
    noun="Processing",
    resources_path=("ProcessingResources", "ClusterConfig"),
    image_path=("AppSpecification", "ImageUri"),
    candidates=service_rules.processing_candidates,
    capacity_rule=lambda behaviour: behaviour.processing_without_capacity,
    records_secondary_status=False,
    times_out_pending=False,
    status_filter_after_paging=False,
    timeline=_processing_timeline,
    run_window=_processing_run_window,
    log_group="/aws/sagemaker/ProcessingJobs",
    not_found=lambda name: f"Could not find requested job with name {name}",
    describe_extras=responses.processing_describe_extras,
    inputs=job_data.processing_inputs,
    outputs=job_data.processing_outputs,
    summary_extras=responses.processing_summary_extras,
)

KINDS = {kind.name: kind for kind in (TRAINING, PROCESSING)}

# "DescribeTrainingJob" -> ("Describe", TRAINING): the operations the emulator serves.
OPERATIONS: dict[str, tuple[Action, EmulatedKind]] = {
    kind.operation(action): (action, kind) for kind in KINDS.values() for action in ACTIONS
}
