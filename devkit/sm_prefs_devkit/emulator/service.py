"""The emulated service as a whole: an engine, the faults it plays, and persistence to a state file.

``call`` is the one entry point of the AWS API side: it counts the call, plays the faults, and dispatches
an operation to the engine. The HTTP protocol (``protocol.py``) and the control surface (``control.py``)
both talk to this object.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from sm_prefs_devkit.emulator import instance_metrics, logs, pricing, s3, service_model, service_quotas, training_plans
from sm_prefs_devkit.emulator.engine import STATE_FORMAT, Engine
from sm_prefs_devkit.emulator.errors import (
    AccessDeniedException,
    InternalFailure,
    SerializationException,
    ThrottlingException,
    UnknownOperationException,
    ValidationException,
    shorten,
)
from sm_prefs_devkit.emulator.kinds import OPERATIONS
from sm_prefs_devkit.emulator.log_groups import LogGroupStore, LogsUnavailable
from sm_prefs_devkit.emulator.s3 import ObjectStore, S3Unavailable
from sm_prefs_devkit.emulator.scenario import Scenario
from sm_prefs_devkit.emulator.state_files import ObjectFiles, inline_objects, write_json

log = logging.getLogger(__name__)

UNKNOWN_OPERATIONS = "(unknown operations)"
# The other AWS APIs served on the same endpoint, by the prefix of their X-Amz-Target.
SERVICES = {api.TARGET_PREFIX: api for api in (logs, pricing, service_quotas, instance_metrics)}


@dataclass(frozen=True)
class Backends:
    """What a service of ``SERVICES`` answers from: each module's ``answer(backends, operation, request,
    region)`` reads the engine's jobs and scenario, or the clients' log groups; its ``WRITES`` are saved."""

    engine: Engine
    log_groups: LogGroupStore | None


LIST_TAGS = "ListTags"  # of a job, by its ARN: what rebuilding the capacity ledger from SageMaker reads
# What the listener writes on a job it kept running after its task failed for a reason it cannot attribute.
ADD_TAGS = "AddTags"


class StateFileError(ValueError):
    """A state file the emulator cannot resume from."""


class Emulator:
    def __init__(self, scenario: Scenario, state_file: Path | None = None, scenario_source: str | None = None) -> None:
        self.state_file = state_file
        # What the scenario was loaded from (a bundled name or the path given on the command line): the
        # only file a control-surface reset may read.
        self.scenario_source = scenario_source
        self.random = random.Random(scenario.seed)
        self.faults = scenario.faults
        self.s3 = _object_store(scenario)
        self.log_groups = _log_group_store(scenario)
        self._saved_objects = self._saved_groups = -1
        # One save at a time, from reading the stores to the last file: a later state is never overwritten by an
        # earlier one, and no body file is deleted while an index that names it may still be written.
        self._saving = threading.Lock()
        self.engine = self._load(scenario)
        self._saved_version = -1

    def _load(self, scenario: Scenario) -> Engine:
        if self.state_file is None or not self.state_file.exists():
            return self._fresh_engine(scenario)
        where = self.state_file
        try:
            state = json.loads(where.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
                raise ValueError(f"not format {STATE_FORMAT}")
            inline = state.pop("s3", None)  # earlier state files kept the objects inside
            saved_objects = inline_objects(inline or {})
            if inline is None and self.objects_file is not None and self.objects_file.exists():
                saved_objects = self.objects_file.read()
            engine = Engine.from_state(scenario, state, storage=self.s3)
            if self.s3 is not None:
                self.s3.restore(saved_objects)
                self.s3.seed(scenario.buckets)
            if self.log_groups is not None and self.groups_file is not None and self.groups_file.exists():
                self.log_groups.restore(json.loads(self.groups_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise StateFileError(
                f"state file {where} is not one this emulator wrote ({type(error).__name__}: {shorten(str(error))}); "
                "move it away to start afresh"
            ) from None
        log.info("emulator: resumed %d job(s) from %s", len(engine.jobs), where)
        return engine

    def _fresh_engine(self, scenario: Scenario) -> Engine:
        if self.s3 is not None:
            self.s3.clear()
            self.s3.seed(scenario.buckets)
        if self.log_groups is not None:
            self.log_groups.clear()
        return Engine(scenario, storage=self.s3)

    def reset(self, scenario: Scenario | None = None) -> None:
        scenario = scenario or self.engine.scenario
        with self.engine.lock:
            self.engine = self._fresh_engine(scenario)
            self.faults = scenario.faults
            self.random = random.Random(scenario.seed)
        self.save(force=True)  # a save takes the engine's lock after its own: never with the engine's held

    @cached_property
    def objects_file(self) -> ObjectFiles | None:
        """Where the S3 objects are kept, beside the state file: written only when they change (a job's create
        does not rewrite hundreds of megabytes of objects), and then only the objects that changed."""
        return ObjectFiles(self.state_file.with_name(self.state_file.name + ".s3")) if self.state_file else None

    @property
    def groups_file(self) -> Path | None:
        """Where the clients' log groups are kept (Airflow's remote task logs), beside the state file, written
        only when they change."""
        return self.state_file.with_name(self.state_file.name + ".logs") if self.state_file is not None else None

    def save(self, force: bool = False) -> None:
        if self.state_file is None:
            return
        with self._saving:
            self._save(self.state_file, force)

    def _save(self, state_file: Path, force: bool) -> None:
        objects: tuple[dict[str, dict[str, str]], dict[str, bytes]] | None = None
        groups: dict[str, Any] | None = None
        with self.engine.lock:
            # Only what changed is written: a client's log write rewrites neither the jobs nor the objects.
            state = self.engine.to_state() if force or self.engine.version != self._saved_version else None
            if self.s3 is not None and self.objects_file is not None and self.s3.version != self._saved_objects:
                objects = self.s3.dump(self.objects_file.on_disk())
                self._saved_objects = self.s3.version
            if self.log_groups is not None and self.log_groups.version != self._saved_groups:
                groups = self.log_groups.dump()
                self._saved_groups = self.log_groups.version
            self._saved_version = self.engine.version
        try:
            if objects is not None:
                assert self.objects_file is not None
                self.objects_file.write(*objects)
            if groups is not None:
                assert self.groups_file is not None
                write_json(self.groups_file, groups)
            if state is not None:
                write_json(state_file, state)
        except BaseException:
            self._saved_version = self._saved_objects = self._saved_groups = -1
            raise

    def call(self, operation: str, request: dict[str, Any], region: str | None = None) -> dict[str, Any]:
        """One AWS API call; ``region`` is the one the request was signed for (default: the scenario's)."""
        if operation == LIST_TAGS:
            self.engine.calls[operation] += 1
            self._play_faults(operation)
            _check_against_model(operation, request)
            return self.engine.list_tags(request, region)
        if operation == ADD_TAGS:
            self.engine.calls[operation] += 1
            self._play_faults(operation)
            _check_against_model(operation, request)
            tagged = self.engine.add_tags(request, region)
            self.save()
            return tagged
        if operation in training_plans.OPERATIONS:
            self.engine.calls[operation] += 1
            self._play_faults(operation)
            _check_against_model(operation, request)
            answer: dict[str, Any] = self.engine.training_plan_call(operation, request, region)
            if operation in training_plans.WRITES:
                self.save()
            return answer
        if operation not in OPERATIONS:
            # Counted under one key: names a client makes up must not grow what the emulator remembers.
            self.engine.calls[UNKNOWN_OPERATIONS] += 1
            raise UnknownOperationException(
                f"SageMaker.{shorten(operation)} is not supported by the airflow-sm-prefs emulator; it implements "
                f"{', '.join(sorted([*OPERATIONS, LIST_TAGS, ADD_TAGS, *training_plans.OPERATIONS]))}."
            )
        self.engine.calls[operation] += 1
        self._play_faults(operation)
        action, kind = OPERATIONS[operation]
        _check_against_model(operation, request)
        result: dict[str, Any] = {}
        if action == "Create":
            result = self.engine.create(kind.name, request, region)
            try:
                self.save()
            except (OSError, ValueError) as error:
                # The client is told the create failed, so the job must not exist: its retry would meet
                # ResourceInUse for a job it never got.
                self.engine.forget(kind.name, request[kind.name_field], region)
                log.error("emulator: could not persist the new job, so it was not created: %s", error)
                raise InternalFailure("The job could not be recorded; it was not created. Please try again.") from error
        elif action == "List":
            result = self.engine.list_jobs(kind.name, request, region)
        else:
            if action == "Describe":
                result = self.engine.describe(kind.name, request[kind.name_field], region)
            else:
                self.engine.stop(kind.name, request[kind.name_field], region)
        self.save()
        if self.faults.lost_reply_rate and self.random.random() < self.faults.lost_reply_rate:
            raise InternalFailure()
        return result

    def call_s3(self, method: str, target: str, headers: dict[str, str], body: bytes) -> s3.Reply:
        """An S3 request on the same endpoint (moto answers it); a change is saved like a job's."""
        if self.s3 is None:
            return 501, {"Content-Type": "text/plain"}, b"S3 needs moto: pip install 'moto[s3]'"
        # A listing is a GET of the bucket: counted apart, so a test can tell what was fetched from what was listed.
        listing = method == "GET" and "list-type=" in target.partition("?")[2]
        self.engine.calls["s3.LIST" if listing else f"s3.{method}"] += 1
        deleting = s3.delete_operation(method, target)
        if deleting is not None and deleting in self.faults.deny:
            return s3.access_denied(deleting)
        with self.engine.lock:
            # Under the engine's lock, so a state file never holds half of a request's change.
            status, reply_headers, reply = self.s3.handle(method, target, headers, body)
            changed = method in ("PUT", "POST", "DELETE") and status < 300
        if changed:
            self.save()
        return status, reply_headers, reply

    def close(self) -> None:
        self.save(force=True)
        if self.s3 is not None:
            self.s3.close()
        if self.log_groups is not None:
            self.log_groups.close()

    def call_service(
        self, api: Any, operation: str, request: dict[str, Any], region: str | None = None
    ) -> dict[str, Any]:
        """A call to one of the other AWS APIs served on this endpoint (``SERVICES``), counted and faulted like
        any other call and checked against that service's botocore model."""
        counted = f"{api.TARGET_PREFIX}.{operation}" if operation in api.KNOWN else UNKNOWN_OPERATIONS
        self.engine.calls[counted] += 1
        self._play_faults(operation, api.SERVICE)
        if operation in api.KNOWN:
            _check_against_model(operation, request, api.SERVICE)
        region = region or self.engine.scenario.region
        try:
            answer: dict[str, Any] = api.answer(Backends(self.engine, self.log_groups), operation, request, region)
        except KeyError as missing:  # a request without a field the operation needs: the caller's fault
            raise ValidationException(f"1 validation error detected: {missing} is required for {operation}") from None
        except (TypeError, ValueError) as error:
            raise ValidationException(f"1 validation error detected: {shorten(str(error))}") from None
        if operation in api.WRITES:
            self.save()
        return answer

    def _play_faults(self, operation: str, service: str = "sagemaker") -> None:
        faults = self.faults
        if operation in faults.deny:
            raise AccessDeniedException(
                f"User: arn:aws:sts::{self.engine.scenario.account_id}:assumed-role/emulated is not authorized to "
                f"perform: {service}:{operation} because no identity-based policy allows the {service}:{operation} "
                "action"
            )
        delay = faults.latency_ms + faults.slow_operations.get(operation, 0.0)
        if delay:
            time.sleep(delay / 1000.0)
        draw = self.random.random()
        if draw < faults.throttle_rate:
            raise ThrottlingException()
        if draw < faults.throttle_rate + faults.error_rate:
            raise InternalFailure()


def _object_store(scenario: Scenario) -> ObjectStore | None:
    try:
        return ObjectStore(scenario.account_id, scenario.region)
    except S3Unavailable as error:
        log.warning("emulator: serving no S3 (%s)", error)
        return None


def _log_group_store(scenario: Scenario) -> LogGroupStore | None:
    try:
        return LogGroupStore(scenario.account_id)
    except LogsUnavailable as error:
        log.warning("emulator: serving only the jobs' log groups (%s)", error)
        return None


def _check_against_model(operation: str, request: dict[str, Any], service: str = "sagemaker") -> None:
    """What the service refuses before it looks at anything: wrong JSON types, then broken constraints."""
    problems = service_model.request_violations(operation, request, service)
    wrong_types = [problem for problem in problems if service_model.is_type_mismatch(problem)]
    if wrong_types:
        raise SerializationException("; ".join(wrong_types))
    if problems:
        count = len(problems)
        raise ValidationException(
            f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(problems)
        )
