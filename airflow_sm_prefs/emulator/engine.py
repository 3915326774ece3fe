"""The emulated SageMaker: jobs, a capacity pool, a queue, and a virtual clock.

A discrete-event simulation: every API call first advances the simulation to the current virtual time,
processing due events (phase changes, capacity events, pending timeouts) in time order, so a job's history
is the same however often, or rarely, it is looked at.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import heapq
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from airflow_sm_prefs.emulator import service_model, service_rules
from airflow_sm_prefs.emulator.scenario import Scenario
from airflow_sm_prefs.emulator.service_rules import Candidate, ServiceError, invalid

TRAINING = "training"
PROCESSING = "processing"
TERMINAL = ("Completed", "Failed", "Stopped")

CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity for any of the requested instance "
    "types ({types}). Please retry using a different ML instance type."
)
WAITING_MESSAGE = "Waiting for capacity: none of the preferred instance types ({types}) is available yet."


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
    epoch: int = 0
    tags: list[dict[str, str]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return job_key(self.kind, self.name)

    def candidate_objects(self) -> list[Candidate]:
        return [Candidate(**c) for c in self.candidates]

    @property
    def accelerated(self) -> bool:
        return any(service_rules.is_accelerated(c["instance_type"]) for c in self.candidates)


def job_key(kind: str, name: str) -> str:
    # SageMaker job names are unique per account and Region regardless of case.
    return f"{kind}:{name.lower()}"


class Clock:
    """Virtual time: ``speed`` virtual seconds per real second, plus explicit advances."""

    def __init__(self, speed: float, origin: float | None = None, now: float | None = None) -> None:
        self.speed = speed
        self.origin = origin if origin is not None else time.time()
        self._base = now if now is not None else self.origin
        self._real_anchor = time.monotonic()

    def now(self) -> float:
        return self._base + (time.monotonic() - self._real_anchor) * self.speed

    def advance(self, seconds: float) -> None:
        self._base += seconds


class Engine:
    def __init__(self, scenario: Scenario, clock: Clock | None = None) -> None:
        self.scenario = scenario
        self.lock = threading.RLock()
        self.clock = clock or Clock(scenario.speed)
        self.jobs: dict[str, Job] = {}
        self.events: list[tuple[float, int, str, list[Any]]] = []
        self.seq = 0
        self.capacity_override: dict[str, int] = {}
        self.held: Counter[str] = Counter()
        self.plan_used: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.version = 0
        self._schedule_scenario()

    # -- clock and events -------------------------------------------------------------------------------

    def _schedule_scenario(self) -> None:
        for index, event in enumerate(self.scenario.events):
            self._push(self.clock.origin + event.at, "scenario_event", [index])
        for plan in self.scenario.training_plans:
            self._push(self.clock.origin + plan.start, "capacity_changed", [])
            if plan.end is not None:
                self._push(self.clock.origin + plan.end, "capacity_changed", [])

    def _push(self, at: float, kind: str, args: list[Any]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, args))

    def advance(self, now: float | None = None) -> float:
        """Process every event due by ``now`` (default: the clock's current time), in time order."""
        now = self.clock.now() if now is None else now
        while self.events and self.events[0][0] <= now:
            at, _, kind, args = heapq.heappop(self.events)
            self._handle(at, kind, args)
            self.version += 1
        return now

    def _handle(self, at: float, kind: str, args: list[Any]) -> None:
        if kind == "scenario_event":
            event = self.scenario.events[args[0]]
            self.capacity_override.update(event.set_capacity)
            self._place_waiting(at)
        elif kind == "capacity_changed":
            self._place_waiting(at)
        else:
            job = self.jobs.get(args[0])
            if job is None or job.epoch != args[1] or job.status in TERMINAL:
                return  # a stale event for a job that was stopped or ended meanwhile
            handler: Callable[..., None] = getattr(self, f"_on_{kind}")
            handler(job, at, *args[2:])

    # -- capacity -------------------------------------------------------------------------------------------

    def capacity(self, instance_type: str) -> int:
        return self.capacity_override.get(instance_type, self.scenario.capacity_for(instance_type))

    def free(self, instance_type: str) -> int:
        return max(0, self.capacity(instance_type) - self.held[instance_type])

    def _plan_free(self, arn: str, at: float) -> int:
        plan = next(p for p in self.scenario.training_plans if p.arn == arn)
        relative = at - self.clock.origin
        active = plan.start <= relative and (plan.end is None or relative < plan.end)
        return plan.count - plan.in_use - self.plan_used[arn] if active else 0

    def _fits(self, candidate: Candidate, at: float) -> bool:
        if candidate.plan_arn is not None:
            return self._plan_free(candidate.plan_arn, at) >= candidate.count
        return self.free(candidate.instance_type) >= candidate.count

    def set_capacity(self, capacity: dict[str, int]) -> None:
        with self.lock:
            now = self.advance()
            self.capacity_override.update(capacity)
            self._place_waiting(now)
            self.version += 1

    def in_use(self, kind: str) -> dict[str, int]:
        usage: Counter[str] = Counter()
        for job in self.jobs.values():
            if job.kind == kind and job.selected and job.status not in TERMINAL:
                usage[job.selected["instance_type"]] += job.selected["count"]
        return dict(usage)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def _transition(self, job: Job, at: float, secondary: str | None, message: str, status: str | None = None) -> None:
        if status is not None:
            job.status = status
        job.last_modified = at
        if job.kind != TRAINING:
            return
        job.secondary = secondary
        if job.transitions and "EndTime" not in job.transitions[-1]:
            job.transitions[-1]["EndTime"] = at
        entry: dict[str, Any] = {"Status": secondary, "StartTime": at, "StatusMessage": message}
        if job.status in TERMINAL:
            entry["EndTime"] = at
        job.transitions.append(entry)

    def _try_place(self, job: Job, at: float) -> bool:
        for candidate in job.candidate_objects():
            if self._fits(candidate, at):
                self._select(job, candidate, at)
                return True
        return False

    def _place_waiting(self, at: float) -> None:
        waiting = sorted((j for j in self.jobs.values() if j.pending), key=lambda j: (j.created, j.seq))
        for job in waiting:
            self._try_place(job, at)

    def _select(self, job: Job, candidate: Candidate, at: float) -> None:
        job.pending = False
        job.selected = {
            "rank": candidate.rank,
            "instance_type": candidate.instance_type,
            "count": candidate.count,
            "plan_arn": candidate.plan_arn,
        }
        if candidate.plan_arn is not None:
            self.plan_used[candidate.plan_arn] += candidate.count
        else:
            self.held[candidate.instance_type] += candidate.count
        scenario = self.scenario
        self._transition(
            job,
            at,
            "Starting",
            f"Launching {candidate.count} x {candidate.instance_type} (preference #{candidate.rank + 1}).",
        )
        started = at + scenario.startup_seconds
        self._push(started, "started", [job.key, job.epoch])
        if job.kind == TRAINING:
            training = started + scenario.download_seconds
            uploading = training + scenario.runtime_for(candidate.instance_type)
            self._push(
                training,
                "phase",
                [job.key, job.epoch, "Training", "Training image download completed. Training in progress."],
            )
            self._push(uploading, "phase", [job.key, job.epoch, "Uploading", "Uploading generated training model"])
            self._push(uploading + scenario.upload_seconds, "finished", [job.key, job.epoch])
            limit = (job.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
            if limit is not None:
                self._push(started + limit, "runtime_exceeded", [job.key, job.epoch])
        else:
            self._push(started + scenario.runtime_for(candidate.instance_type), "finished", [job.key, job.epoch])
            limit = (job.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
            if limit is not None:
                self._push(started + limit, "runtime_exceeded", [job.key, job.epoch])
        for failure in scenario.failures:
            if failure.instance_type == candidate.instance_type:
                self._push(started + failure.after_seconds, "failed", [job.key, job.epoch, failure.reason])

    def _release(self, job: Job) -> None:
        if job.selected is None:
            return
        if job.selected["plan_arn"] is not None:
            self.plan_used[job.selected["plan_arn"]] -= job.selected["count"]
        else:
            self.held[job.selected["instance_type"]] -= job.selected["count"]

    def _end(self, job: Job, at: float, status: str, secondary: str, message: str, reason: str | None = None) -> None:
        job.epoch += 1  # invalidates this job's outstanding events
        job.pending = False
        if job.start_time is not None:
            job.end_time = at
        if reason is not None:
            job.failure_reason = reason
        self._transition(job, at, secondary, message, status)
        self._release(job)
        self._place_waiting(at)

    def _on_started(self, job: Job, at: float) -> None:
        job.start_time = at
        self._transition(job, at, "Downloading", "Downloading input data")

    def _on_phase(self, job: Job, at: float, secondary: str, message: str) -> None:
        self._transition(job, at, secondary, message)

    def _on_finished(self, job: Job, at: float) -> None:
        self._end(
            job,
            at,
            "Completed",
            "Completed",
            "Training job completed" if job.kind == TRAINING else "Processing job completed",
        )

    def _on_failed(self, job: Job, at: float, reason: str) -> None:
        self._end(job, at, "Failed", "Failed", f"Training job failed. Reason: {reason}", reason)
        if job.kind == PROCESSING:
            job.exit_message = reason[:1024]

    def _on_runtime_exceeded(self, job: Job, at: float) -> None:
        self._end(job, at, "Stopped", "MaxRuntimeExceeded", "Training job stopped: MaxRuntimeInSeconds was reached.")

    def _on_pending_timeout(self, job: Job, at: float) -> None:
        if not job.pending:
            return
        waited = int(at - job.created)
        types = ", ".join(c["instance_type"] for c in job.candidates)
        reason = (
            f"CapacityError: No capacity became available for any preferred instance type ({types}) within "
            f"MaxPendingTimeInSeconds ({waited} seconds pending)."
        )
        status = self.scenario.behaviour.pending_timeout_status
        self._end(job, at, status, status, reason, reason)

    def _on_stop_complete(self, job: Job, at: float) -> None:
        self._end(
            job,
            at,
            "Stopped",
            "Stopped",
            "Training job stopped" if job.kind == TRAINING else "Processing job stopped",
        )

    # -- API operations -----------------------------------------------------------------------------------

    def create(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        operation = "CreateTrainingJob" if kind == TRAINING else "CreateProcessingJob"
        problems = service_model.request_violations(operation, request)
        if problems:
            count = len(problems)
            raise invalid(f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(problems))
        scenario = self.scenario
        if kind == TRAINING:
            candidates, uses_preferences = service_rules.training_candidates(request, scenario)
            image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
            name = request["TrainingJobName"]
        else:
            candidates, uses_preferences = service_rules.processing_candidates(request, scenario)
            image = request["AppSpecification"].get("ImageUri")
            name = request["ProcessingJobName"]
        service_rules.check_algorithm(image, candidates, scenario, kind)
        with self.lock:
            now = self.advance()
            key = job_key(kind, name)
            if key in self.jobs:
                raise ServiceError(
                    "ResourceInUse",
                    f"{kind.capitalize()} job names must be unique within an AWS account and region, and a "
                    f"{kind} job with this name already exists ({self.jobs[key].arn})",
                )
            service_rules.check_quotas(candidates, self.in_use(kind), scenario, kind)
            self.seq += 1
            arn = f"arn:aws:sagemaker:{scenario.region}:{scenario.account_id}:{kind}-job/{name.lower()}"
            job = Job(
                kind=kind,
                name=name,
                arn=arn,
                request=copy.deepcopy(request),
                candidates=[dataclasses.asdict(c) for c in candidates],
                uses_preferences=uses_preferences,
                created=now,
                seq=self.seq,
                last_modified=now,
                tags=list(request.get("Tags") or []),
            )
            self.jobs[key] = job
            if not self._try_place(job, now):
                self._queue_or_fail(job, now)
            self.version += 1
            return {"TrainingJobArn" if kind == TRAINING else "ProcessingJobArn": arn}

    def _queue_or_fail(self, job: Job, now: float) -> None:
        behaviour = self.scenario.behaviour
        types = ", ".join(c["instance_type"] for c in job.candidates)
        if job.kind == TRAINING:
            waits = job.accelerated
        else:
            rule = behaviour.processing_without_capacity
            waits = rule == "wait" or (rule == "accelerated-waits" and job.accelerated)
        if not waits:
            job.selected = None
            self._end(
                job,
                now,
                "Failed",
                "Failed",
                CAPACITY_ERROR.format(types=types),
                CAPACITY_ERROR.format(types=types),
            )
            return
        job.pending = True
        self._transition(job, now, "Pending", WAITING_MESSAGE.format(types=types))
        if job.kind == TRAINING:
            limit = (job.request.get("StoppingCondition") or {}).get("MaxPendingTimeInSeconds")
            if limit is None:
                limit = behaviour.default_max_pending_seconds
            if limit is not None:
                self._push(now + limit, "pending_timeout", [job.key, job.epoch])

    def _get(self, kind: str, name: str) -> Job:
        job = self.jobs.get(job_key(kind, name))
        if job is None:
            message = (
                "Requested resource not found."
                if kind == TRAINING
                else f"Could not find requested job with name {name}"
            )
            raise invalid(message)
        return job

    def describe(self, kind: str, name: str) -> dict[str, Any]:
        with self.lock:
            self.advance()
            job = self._get(kind, name)
            return (
                describe_training(job, self.scenario) if kind == TRAINING else describe_processing(job, self.scenario)
            )

    def stop(self, kind: str, name: str) -> None:
        with self.lock:
            now = self.advance()
            job = self.jobs.get(job_key(kind, name))
            if job is None:
                raise ServiceError("ResourceNotFound", f"Could not find {kind} job {name}.")
            if job.status in TERMINAL:
                raise invalid(f"The request was rejected because the {kind} job is in status {job.status}.")
            if job.status == "Stopping":
                return
            job.epoch += 1
            was_pending = job.pending
            job.pending = False
            self._transition(job, now, "Stopping", "Stopping the job", "Stopping")
            delay = min(self.scenario.stop_seconds, 5.0) if was_pending else self.scenario.stop_seconds
            self._push(now + delay, "stop_complete", [job.key, job.epoch])
            self.version += 1

    def list_jobs(self, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        operation = "ListTrainingJobs" if kind == TRAINING else "ListProcessingJobs"
        problems = service_model.request_violations(operation, request)
        if problems:
            raise invalid("; ".join(problems))
        with self.lock:
            self.advance()
            jobs = [j for j in self.jobs.values() if j.kind == kind and _matches(j, request)]
            sort_by = request.get("SortBy", "CreationTime")
            sort_key: Callable[[Job], Any] = {
                "Name": lambda j: j.name,
                "Status": lambda j: j.status,
                "CreationTime": lambda j: (j.created, j.seq),
            }[sort_by]
            jobs.sort(key=sort_key, reverse=request.get("SortOrder", "Ascending") == "Descending")
            offset = _decode_token(request.get("NextToken"))
            limit = request.get("MaxResults", 10)
            page = jobs[offset : offset + limit]
            # Documented quirk: with StatusEquals the service takes MaxResults jobs first, then filters them.
            status = request.get("StatusEquals")
            summaries = [summarize(j) for j in page if status is None or j.status == status]
            response: dict[str, Any] = {
                "TrainingJobSummaries" if kind == TRAINING else "ProcessingJobSummaries": summaries
            }
            if offset + limit < len(jobs):
                response["NextToken"] = _encode_token(offset + limit)
            return response

    # -- persistence ------------------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        with self.lock:
            return {
                "format": 1,
                "origin": self.clock.origin,
                "now": self.clock.now(),
                "seq": self.seq,
                "events": self.events,
                "capacity_override": self.capacity_override,
                "held": dict(self.held),
                "plan_used": dict(self.plan_used),
                "jobs": [dataclasses.asdict(j) for j in self.jobs.values()],
            }

    @classmethod
    def from_state(cls, scenario: Scenario, state: dict[str, Any]) -> Engine:
        engine = cls.__new__(cls)
        engine.scenario = scenario
        engine.lock = threading.RLock()
        engine.clock = Clock(scenario.speed, origin=state["origin"], now=state["now"])
        engine.jobs = {}
        for raw in state["jobs"]:
            job = Job(**raw)
            engine.jobs[job.key] = job
        engine.events = [tuple(e) for e in state["events"]]  # type: ignore[misc]
        heapq.heapify(engine.events)
        engine.seq = state["seq"]
        engine.capacity_override = dict(state["capacity_override"])
        engine.held = Counter(state["held"])
        engine.plan_used = Counter(state["plan_used"])
        engine.calls = Counter()
        engine.version = 0
        return engine

    def snapshot(self) -> list[dict[str, Any]]:
        """Every job, for the control surface: what tests and the fault campaign audit."""
        with self.lock:
            self.advance()
            return [
                {
                    "kind": j.kind,
                    "name": j.name,
                    "arn": j.arn,
                    "status": j.status,
                    "secondary_status": j.secondary,
                    "created": j.created,
                    "last_modified": j.last_modified,
                    "selected": j.selected,
                    "pending": j.pending,
                    "tags": {t["Key"]: t["Value"] for t in j.tags},
                    "preferences": j.candidates,
                    "failure_reason": j.failure_reason,
                }
                for j in sorted(self.jobs.values(), key=lambda j: (j.created, j.seq))
            ]


def _matches(job: Job, request: dict[str, Any]) -> bool:
    name_contains = request.get("NameContains")
    if name_contains and name_contains.lower() not in job.name.lower():
        return False
    bounds = (
        ("CreationTimeAfter", job.created, 1),
        ("CreationTimeBefore", job.created, -1),
        ("LastModifiedTimeAfter", job.last_modified, 1),
        ("LastModifiedTimeBefore", job.last_modified, -1),
    )
    for key, value, direction in bounds:
        if key in request:
            limit = float(request[key])
            if (direction == 1 and not value > limit) or (direction == -1 and not value < limit):
                return False
    return True


def _encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise invalid("Invalid pagination token given") from exc


def _echo(job: Job, operation: str) -> dict[str, Any]:
    members = service_model.operation(operation).output_shape.members  # type: ignore[union-attr]
    return {k: copy.deepcopy(v) for k, v in job.request.items() if k in members}


def _selected_fields(job: Job, resources: dict[str, Any], scenario: Scenario) -> None:
    if job.uses_preferences and not scenario.behaviour.echo_instance_count:
        resources.pop("InstanceCount", None)
    if job.uses_preferences and job.selected is not None:
        resources["SelectedInstanceType"] = job.selected["instance_type"]
        resources["SelectedInstanceCount"] = job.selected["count"]


def describe_training(job: Job, scenario: Scenario) -> dict[str, Any]:
    body = _echo(job, "DescribeTrainingJob")
    body.pop("Tags", None)
    output = job.request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    body.update(
        {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "ModelArtifacts": {"S3ModelArtifacts": f"{output}/{job.name}/output/model.tar.gz"},
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary or "Starting",
            "StoppingCondition": body.get("StoppingCondition") or {"MaxRuntimeInSeconds": 86400},
            "CreationTime": job.created,
            "LastModifiedTime": job.last_modified,
            "SecondaryStatusTransitions": copy.deepcopy(job.transitions),
        }
    )
    _selected_fields(job, body["ResourceConfig"], scenario)
    if job.start_time is not None:
        body["TrainingStartTime"] = job.start_time
    if job.end_time is not None:
        body["TrainingEndTime"] = job.end_time
        seconds = max(1, math.ceil(job.end_time - job.start_time)) if job.start_time is not None else None
        if seconds is not None:
            body["TrainingTimeInSeconds"] = seconds
            body["BillableTimeInSeconds"] = seconds
    if job.failure_reason:
        body["FailureReason"] = job.failure_reason[:1024]
    return body


def describe_processing(job: Job, scenario: Scenario) -> dict[str, Any]:
    body = _echo(job, "DescribeProcessingJob")
    body.update(
        {
            "ProcessingJobName": job.name,
            "ProcessingJobArn": job.arn,
            "ProcessingJobStatus": job.status,
            "CreationTime": job.created,
            "LastModifiedTime": job.last_modified,
        }
    )
    _selected_fields(job, body["ProcessingResources"]["ClusterConfig"], scenario)
    if job.start_time is not None:
        body["ProcessingStartTime"] = job.start_time
    if job.end_time is not None:
        body["ProcessingEndTime"] = job.end_time
    if job.failure_reason:
        body["FailureReason"] = job.failure_reason[:1024]
    if job.exit_message:
        body["ExitMessage"] = job.exit_message
    return body


def summarize(job: Job) -> dict[str, Any]:
    if job.kind == TRAINING:
        summary: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
            "CreationTime": job.created,
            "LastModifiedTime": job.last_modified,
            "TrainingJobStatus": job.status,
            "SecondaryStatus": job.secondary or "Starting",
        }
        if job.end_time is not None:
            summary["TrainingEndTime"] = job.end_time
        return summary
    summary = {
        "ProcessingJobName": job.name,
        "ProcessingJobArn": job.arn,
        "CreationTime": job.created,
        "LastModifiedTime": job.last_modified,
        "ProcessingJobStatus": job.status,
    }
    if job.end_time is not None:
        summary["ProcessingEndTime"] = job.end_time
    if job.failure_reason:
        summary["FailureReason"] = job.failure_reason[:1024]
    return summary
