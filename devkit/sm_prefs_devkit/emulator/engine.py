"""The emulated SageMaker as a state machine: jobs, a capacity pool, a queue, and a virtual clock.

A discrete-event simulation: every API call first advances the simulation to the current virtual time,
processing due events (phase changes, capacity events, pending timeouts) in time order, so a job's history
is the same however often, or rarely, it is looked at. What differs between training and processing is
read from the kind table (``kinds.py``); request rules are in ``service_rules.py``, response shapes in
``responses.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NotRequired

from pydantic import FiniteFloat, TypeAdapter
from typing_extensions import TypedDict

from sm_prefs_devkit.emulator import job_data, job_logs, listing, responses, service_rules, training_plans
from sm_prefs_devkit.emulator.errors import ResourceInUse, ResourceNotFound, ServiceError, ValidationException
from sm_prefs_devkit.emulator.kinds import KINDS, EmulatedKind
from sm_prefs_devkit.emulator.model import Job, job_key
from sm_prefs_devkit.emulator.scenario import Scenario
from sm_prefs_devkit.emulator.service_rules import Candidate

TERMINAL = ("Completed", "Failed", "Stopped")
MAX_TAGS = 50  # per resource
STATE_FORMAT = 1

CAPACITY_ERROR = (
    "CapacityError: Unable to provision requested ML compute capacity for any of the requested instance "
    "types ({types}). Please retry using a different ML instance type."
)
WAITING_MESSAGE = "Waiting for capacity: none of the preferred instance types ({types}) is available yet."


class SavedState(TypedDict):
    """The state file's shape, checked on load so a damaged file fails the start, not a later call."""

    format: int
    origin: FiniteFloat
    now: FiniteFloat
    seq: int
    events: list[tuple[FiniteFloat, int, str, list[Any]]]
    capacity_override: dict[str, int]
    held: dict[str, int]
    plan_used: dict[str, int]
    jobs: list[Job]
    training_plans: NotRequired[dict[str, Any]]  # plans bought and offerings searched (state files before 0.5: none)
    # The wall clock when ``now`` was read: the virtual clock goes on from there on restart (state files
    # before 0.4 have none, and resume at ``now``).
    saved_at: NotRequired[FiniteFloat]
    # Scenario events still waiting for a job to wait (``after_waiting``), by index (before 0.6: none had one).
    armed: NotRequired[list[int]]


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

    def run_at(self, speed: float) -> None:
        """From now on, ``speed`` virtual seconds a real second (0: stopped until told again)."""
        self._base, self._real_anchor = self.now(), time.monotonic()
        self.speed = speed


class Engine:
    def __init__(
        self,
        scenario: Scenario,
        clock: Clock | None = None,
        *,
        schedule_scenario: bool = True,
        storage: job_data.Storage | None = None,
    ) -> None:
        self.scenario = scenario
        # Where jobs read their inputs and write their outputs; None: jobs touch no data (no S3 served).
        self.storage = storage
        self.lock = threading.RLock()
        self.clock = clock or Clock(scenario.speed)
        self.jobs: dict[str, Job] = {}
        self.events: list[tuple[float, int, str, list[Any]]] = []
        self.seq = 0
        self.capacity_override: dict[str, int] = {}
        self.held: Counter[str] = Counter()
        self.plan_used: Counter[str] = Counter()
        self.plans = training_plans.PlanBook(scenario, self.clock.origin)
        self.calls: Counter[str] = Counter()
        self.version = 0
        self.armed = {i for i, event in enumerate(scenario.events) if event.after_waiting is not None}
        if schedule_scenario:
            self._schedule_scenario()

    # -- clock and events -------------------------------------------------------------------------------

    def _schedule_scenario(self) -> None:
        for index, event in enumerate(self.scenario.events):
            if index not in self.armed:
                self._push(self.clock.origin + event.at, "scenario_event", [index])
        for at in self.plans.changes():
            self._push(at, "capacity_changed", [])

    def _push(self, at: float, kind: str, args: list[Any]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, self.seq, kind, args))

    def _push_for(self, job: Job, at: float, kind: str, *args: Any) -> None:
        # The job's epoch goes with the event, so ending or stopping a job voids what it had scheduled.
        self._push(at, kind, [job.key, job.epoch, *args])

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
        plan = self.plans.get(arn)
        if plan is None or not plan.usable(at):
            return 0
        return plan.count - plan.in_use_elsewhere - self.plan_used[arn]

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

    def in_use(self, kind: EmulatedKind, region: str) -> dict[str, int]:
        """Instances the account's running jobs of this kind hold in a Region: what its quotas count."""
        usage: Counter[str] = Counter()
        for job in self.jobs.values():
            if job.kind == kind.name and job.region == region and job.selected and job.status not in TERMINAL:
                usage[job.selected["instance_type"]] += job.selected["count"]
        return dict(usage)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def _transition(self, job: Job, at: float, secondary: str | None, message: str, status: str | None = None) -> None:
        if status is not None:
            job.status = status
        job.last_modified = at
        if not KINDS[job.kind].records_secondary_status:
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
        waiting = sorted(
            (j for j in self.jobs.values() if j.pending and j.place_after <= at), key=lambda j: (j.created, j.seq)
        )
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
            self._reclaim_at_plan_end(job, candidate.plan_arn, at)
        else:
            self.held[candidate.instance_type] += candidate.count
        self._transition(
            job,
            at,
            "Starting",
            f"Launching {candidate.count} x {candidate.instance_type} (preference #{candidate.rank + 1}).",
        )
        started = at + self.scenario.startup_seconds
        self._push_for(job, started, "started")
        kind = KINDS[job.kind]
        # Progress first: at equal times the queue keeps push order, so the last epoch precedes the upload.
        runtime = self.scenario.runtime_for(candidate.instance_type, job.name)
        begin, end = kind.run_window(self.scenario, runtime)
        for step in range(1, job_logs.PROGRESS_STEPS + 1):
            self._push_for(job, started + begin + (end - begin) * step / job_logs.PROGRESS_STEPS, "progress", step)
        milestones, finish = kind.timeline(self.scenario, runtime)
        for offset, secondary, message in milestones:
            self._push_for(job, started + offset, "phase", secondary, message)
        self._push_for(job, started + finish, "finished")
        limit = (job.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        if limit is not None:
            self._push_for(job, started + limit, "runtime_exceeded")
        for failure in self.scenario.failures:
            if failure.instance_type == candidate.instance_type:
                self._push_for(job, started + failure.after_seconds, "failed", failure.reason, list(failure.log_lines))

    def _reclaim_at_plan_end(self, job: Job, arn: str, at: float) -> None:
        plan = self.plans.get(arn)
        reclaimed = plan.reclaimed_from() if plan is not None else None
        if plan is not None and reclaimed is not None:
            self._push_for(job, max(at, reclaimed), "reclaimed", plan.name, plan.end)

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
        job_logs.write(job, at, message)
        self._transition(job, at, secondary, message, status)
        self._release(job)
        self._place_waiting(at)

    def _on_started(self, job: Job, at: float) -> None:
        job.start_time = at
        self._transition(job, at, "Downloading", "Downloading input data")
        job_logs.open_streams(job, at)
        selected = job.selected or {}
        job_logs.write(job, at, f"Started on {selected.get('count')} x {selected.get('instance_type')}")
        inputs = KINDS[job.kind].inputs(job.request)
        if self.scenario.echo_environment:
            for name, value in sorted((job.request.get("Environment") or {}).items()):
                job_logs.write(job, at, f"env {name}={value}", every_instance=False)
        for item in inputs:
            job_logs.write(job, at, f"Downloading input '{item.name}' from {item.uri}")
        if self.storage is not None:
            reason = job_data.missing_input(self.storage, inputs)
            if reason is not None:
                self._on_failed(job, at, reason)

    def _on_phase(self, job: Job, at: float, secondary: str, message: str) -> None:
        job_logs.write(job, at, message)
        self._transition(job, at, secondary, message)

    def _on_progress(self, job: Job, at: float, step: int) -> None:
        job_logs.write(job, at, job_logs.progress_line(KINDS[job.kind].noun, step), every_instance=False)

    def _on_finished(self, job: Job, at: float) -> None:
        if self.storage is not None:
            reason = job_data.write_outputs(self.storage, KINDS[job.kind].outputs(job))
            if reason is not None:
                self._on_failed(job, at, reason)
                return
        self._end(job, at, "Completed", "Completed", f"{KINDS[job.kind].noun} job completed")

    def _on_failed(self, job: Job, at: float, reason: str, lines: list[str] | None = None) -> None:
        for line in lines or ():
            job_logs.write(job, at, line, every_instance=False)
        self._end(job, at, "Failed", "Failed", f"{KINDS[job.kind].noun} job failed. Reason: {reason}", reason)
        job.exit_message = reason

    def _on_reclaimed(self, job: Job, at: float, plan_name: str, plan_end: float) -> None:
        ends = dt.datetime.fromtimestamp(plan_end, dt.UTC).isoformat(timespec="seconds")
        reason = (
            f"CapacityError: training plan {plan_name}'s reserved capacity ends at {ends}; its instances are "
            "reclaimed from 30 minutes before the end."
        )
        self._on_failed(job, at, reason, ["The training plan's reserved capacity is ending: instances reclaimed."])

    def _on_runtime_exceeded(self, job: Job, at: float) -> None:
        noun = KINDS[job.kind].noun
        self._end(job, at, "Stopped", "MaxRuntimeExceeded", f"{noun} job stopped: MaxRuntimeInSeconds was reached.")

    def _on_pending_timeout(self, job: Job, at: float) -> None:
        if not job.pending:
            return
        waited = int(at - job.created)
        reason = (
            f"CapacityError: No capacity became available for any preferred instance type ({job.candidate_types}) "
            f"within MaxPendingTimeInSeconds ({waited} seconds pending)."
        )
        status = self.scenario.behaviour.pending_timeout_status
        self._end(job, at, status, status, reason, reason)

    def _on_placement_due(self, job: Job, at: float) -> None:
        if job.pending:
            self._try_place(job, at)  # no capacity now: it waits in the queue like any other

    def _on_stop_complete(self, job: Job, at: float) -> None:
        self._end(job, at, "Stopped", "Stopped", f"{KINDS[job.kind].noun} job stopped")

    # -- API operations -----------------------------------------------------------------------------------

    def job(self, kind_name: str, name: str, region: str | None = None) -> Job | None:
        """The job of that name in a Region (default: the scenario's), as a test or the control surface asks."""
        return self.jobs.get(job_key(kind_name, name, region or self.scenario.region))

    def create(self, kind_name: str, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """A request already checked against the service model (``service.Emulator.call`` does)."""
        kind = KINDS[kind_name]
        scenario = self.scenario
        candidates, uses_preferences = kind.candidates(request, scenario, self.plans.get)
        service_rules.check_algorithm(kind.image(request), candidates, scenario, kind.name)
        name = request[kind.name_field]
        region = region or scenario.region
        with self.lock:
            now = self.advance()
            key = job_key(kind.name, name, region)
            if key in self.jobs:
                raise ResourceInUse(
                    f"{kind.noun} job names must be unique within an AWS account and region, and a "
                    f"{kind.name} job with this name already exists ({self.jobs[key].arn})"
                )
            service_rules.check_quotas(candidates, self.in_use(kind, region), scenario, kind.name)
            self.seq += 1
            arn = f"arn:aws:sagemaker:{region}:{scenario.account_id}:{kind.name}-job/{name.lower()}"
            job = Job(
                kind=kind.name,
                name=name,
                arn=arn,
                request=copy.deepcopy(request),
                candidates=[dataclasses.asdict(c) for c in candidates],
                uses_preferences=uses_preferences,
                created=now,
                seq=self.seq,
                last_modified=now,
                tags=list(request.get("Tags") or []),
                region=region,
            )
            self.jobs[key] = job
            delay = scenario.selection_delay_for(name)
            if delay > 0:
                job.place_after = now + delay
                self._wait_in_queue(kind, job, now)
                self._push_for(job, job.place_after, "placement_due")
            elif not self._try_place(job, now):
                self._queue_or_fail(kind, job, now)
            self.version += 1
            return {kind.arn_field: arn}

    def _queue_or_fail(self, kind: EmulatedKind, job: Job, now: float) -> None:
        behaviour = self.scenario.behaviour
        if not kind.waits_without_capacity(behaviour, job.accelerated):
            job.selected = None
            reason = CAPACITY_ERROR.format(types=job.candidate_types)
            self._end(job, now, "Failed", "Failed", reason, reason)
            return
        self._wait_in_queue(kind, job, now)

    def _wait_in_queue(self, kind: EmulatedKind, job: Job, now: float) -> None:
        job.pending = True
        self._transition(job, now, "Pending", WAITING_MESSAGE.format(types=job.candidate_types))
        listed = {candidate.instance_type for candidate in job.candidate_objects()}
        for index in sorted(self.armed):
            event = self.scenario.events[index]
            assert event.after_waiting is not None
            if now >= self.clock.origin + event.at and event.after_waiting.instance_type in listed:
                self.armed.discard(index)
                self._push(now + event.after_waiting.seconds, "scenario_event", [index])
        if kind.times_out_pending:
            limit = (job.request.get("StoppingCondition") or {}).get("MaxPendingTimeInSeconds")
            if limit is None:
                limit = self.scenario.behaviour.default_max_pending_seconds
            if limit is not None:
                self._push_for(job, now + limit, "pending_timeout")

    def forget(self, kind_name: str, name: str, region: str | None = None) -> None:
        """Undo a create that could not be recorded: the job, and any capacity it was given, go away."""
        with self.lock:
            job = self.job(kind_name, name, region)
            if job is not None:
                del self.jobs[job.key]
                self._release(job)  # its scheduled events find no job and are dropped
                self._place_waiting(self.clock.now())
                self.version += 1

    def describe(self, kind_name: str, name: str, region: str | None = None) -> dict[str, Any]:
        kind = KINDS[kind_name]
        with self.lock:
            self.advance()
            job = self.job(kind.name, name, region)
            if job is None:
                raise _unknown_job(self.scenario.behaviour.describe_unknown_job, kind.not_found(name))
            return responses.describe(kind, job, self.scenario)

    def stop(self, kind_name: str, name: str, region: str | None = None) -> None:
        kind = KINDS[kind_name]
        with self.lock:
            now = self.advance()
            job = self.job(kind.name, name, region)
            if job is None:
                raise _unknown_job(self.scenario.behaviour.stop_unknown_job, f"Could not find {kind.name} job {name}.")
            if job.status in TERMINAL:
                raise ValidationException(
                    f"The request was rejected because the {kind.name} job is in status {job.status}."
                )
            if job.status == "Stopping":
                return
            job.epoch += 1
            was_pending = job.pending
            job.pending = False
            self._transition(job, now, "Stopping", "Stopping the job", "Stopping")
            delay = min(self.scenario.stop_seconds, 5.0) if was_pending else self.scenario.stop_seconds
            self._push_for(job, now + delay, "stop_complete")
            self.version += 1

    def _tagged_job(self, arn: str, region: str | None) -> Job:
        region = region or self.scenario.region
        job = next((j for j in self.jobs.values() if j.arn == arn and j.region == region), None)
        if job is None:
            raise ValidationException(f"Resource {arn} does not exist or is not taggable.")
        return job

    def add_tags(self, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """Add or overwrite tags of a job by its ARN (SageMaker answers with the tags it was sent)."""
        with self.lock:
            job = self._tagged_job(request["ResourceArn"], region)
            given = {tag["Key"]: tag["Value"] for tag in request["Tags"]}
            kept = [tag for tag in job.tags if tag["Key"] not in given]
            if len(kept) + len(given) > MAX_TAGS:
                raise ValidationException(f"A resource can have at most {MAX_TAGS} tags.")
            job.tags = [*kept, *({"Key": key, "Value": value} for key, value in given.items())]
            self.version += 1
        return {"Tags": list(request["Tags"])}

    def list_tags(self, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """A job's tags by its ARN, paged (``MaxResults`` up to 100, default 50)."""
        with self.lock:
            tags = list(self._tagged_job(request["ResourceArn"], region).tags)
        start = int(request["NextToken"]) if str(request.get("NextToken") or "").isdigit() else 0
        if request.get("NextToken") and not str(request["NextToken"]).isdigit():
            raise ValidationException("The NextToken is invalid.")
        size = int(request.get("MaxResults") or 50)
        result: dict[str, Any] = {"Tags": tags[start : start + size]}
        if start + size < len(tags):
            result["NextToken"] = str(start + size)
        return result

    def training_plan_call(self, operation: str, request: dict[str, Any], region: str | None = None) -> Any:
        """One of ``training_plans.OPERATIONS``; a plan bought is looked at again when it starts and ends."""
        with self.lock:
            now = self.advance()
            bought = set(self.plans.bought)
            result = self.plans.answer(operation, request, region or self.scenario.region, now, dict(self.plan_used))
            for arn in set(self.plans.bought) - bought:
                plan = self.plans.bought[arn]
                self._push(max(plan.start, plan.settled), "capacity_changed", [])
                if plan.end is not None:
                    self._push(plan.end, "capacity_changed", [])
                self.version += 1
            return result

    def list_jobs(self, kind_name: str, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        region = region or self.scenario.region
        with self.lock:
            self.advance()
            in_region = [job for job in self.jobs.values() if job.region == region]
            return listing.page(KINDS[kind_name], in_region, request)

    # -- persistence ------------------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        with self.lock:
            return {
                "format": STATE_FORMAT,
                "origin": self.clock.origin,
                "now": self.clock.now(),
                "saved_at": time.time(),
                "seq": self.seq,
                "events": self.events,
                "capacity_override": self.capacity_override,
                "held": dict(self.held),
                "plan_used": dict(self.plan_used),
                "training_plans": self.plans.to_state(),
                "jobs": [dataclasses.asdict(j) for j in self.jobs.values()],
                "armed": sorted(self.armed),
            }

    @classmethod
    def from_state(cls, scenario: Scenario, state: dict[str, Any], storage: job_data.Storage | None = None) -> Engine:
        """The engine a state file describes; pydantic's ValidationError (a ValueError) if it is misshapen."""
        saved = TypeAdapter(SavedState).validate_python(state)
        # The saved event queue already holds the scenario's events, so they are not scheduled again.
        # SageMaker's clock never runs back: the time that passed while the emulator was down passed for its
        # jobs too, and a client's listing cursor (taken from the Date header) stays behind the clock.
        down = max(0.0, time.time() - saved["saved_at"]) if "saved_at" in saved else 0.0
        engine = cls(
            scenario,
            Clock(scenario.speed, origin=saved["origin"], now=saved["now"] + down * scenario.speed),
            schedule_scenario=False,
            storage=storage,
        )
        for job in saved["jobs"]:
            job.region = job.region or scenario.region  # state files before 0.2.0 had one Region
            engine.jobs[job.key] = job
        engine.events = [(at, seq, kind, list(args)) for at, seq, kind, args in saved["events"]]
        heapq.heapify(engine.events)
        engine.seq = saved["seq"]
        engine.capacity_override = dict(saved["capacity_override"])
        engine.held = Counter(saved["held"])
        engine.plan_used = Counter(saved["plan_used"])
        engine.plans.restore(saved.get("training_plans", {}))
        engine.armed = set(saved.get("armed", engine.armed))
        return engine

    def snapshot(self) -> list[dict[str, Any]]:
        """Every job, for the control surface: what tests and the fault campaign audit."""
        with self.lock:
            self.advance()
            return [
                {
                    "kind": j.kind,
                    "name": j.name,
                    "region": j.region,
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


def _unknown_job(code: str, message: str) -> ServiceError:
    """The error a scenario's behaviour says the service answers for a job that does not exist."""
    return ValidationException(message) if code == ValidationException.code else ResourceNotFound(message)
