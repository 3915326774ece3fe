"""The emulated service as a whole: an engine, the faults it plays, and persistence to a state file.

``call`` is the one entry point of the AWS API side: it counts the call, plays the faults, and dispatches
an operation to the engine. The HTTP protocol (``protocol.py``) and the control surface (``control.py``)
both talk to this object.
"""

from __future__ import annotations

import json
import logging
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_sm_prefs.emulator.engine import Engine
from airflow_sm_prefs.emulator.errors import (
    AccessDeniedException,
    InternalFailure,
    ThrottlingException,
    UnknownOperationException,
    ValidationException,
)
from airflow_sm_prefs.emulator.kinds import OPERATIONS
from airflow_sm_prefs.emulator.scenario import Scenario

log = logging.getLogger(__name__)


class Emulator:
    def __init__(self, scenario: Scenario, state_file: Path | None = None) -> None:
        self.state_file = state_file
        self.random = random.Random(scenario.seed)
        self.faults = scenario.faults
        self.engine = self._load(scenario)
        self._saved_version = -1

    def _load(self, scenario: Scenario) -> Engine:
        if self.state_file is not None and self.state_file.exists():
            state = json.loads(self.state_file.read_text())
            log.info("emulator: resumed %d job(s) from %s", len(state["jobs"]), self.state_file)
            return Engine.from_state(scenario, state)
        return Engine(scenario)

    def reset(self, scenario: Scenario | None = None) -> None:
        scenario = scenario or self.engine.scenario
        with self.engine.lock:
            self.engine = Engine(scenario)
            self.faults = scenario.faults
            self.random = random.Random(scenario.seed)
            self.save(force=True)

    def save(self, force: bool = False) -> None:
        if self.state_file is None:
            return
        with self.engine.lock:
            if not force and self.engine.version == self._saved_version:
                return
            state = self.engine.to_state()
            self._saved_version = self.engine.version
        # Write-then-rename so a crash never leaves a half-written state file behind.
        handle, temporary = tempfile.mkstemp(dir=self.state_file.parent, prefix=".emulator-state-")
        with os.fdopen(handle, "w") as stream:
            json.dump(state, stream)
        os.replace(temporary, self.state_file)

    def call(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        self.engine.calls[operation] += 1
        if operation not in OPERATIONS:
            raise UnknownOperationException(
                f"SageMaker.{operation} is not supported by the airflow-sm-prefs emulator; it implements "
                f"{', '.join(sorted(OPERATIONS))}."
            )
        self._play_faults(operation)
        action, kind = OPERATIONS[operation]
        result: dict[str, Any] = {}
        if action == "Create":
            result = self.engine.create(kind.name, request)
        elif action == "List":
            result = self.engine.list_jobs(kind.name, request)
        else:
            name = request.get(kind.name_field)
            if not isinstance(name, str):
                raise ValidationException(f"'{kind.name_field}' is required but was not provided")
            if action == "Describe":
                result = self.engine.describe(kind.name, name)
            else:
                self.engine.stop(kind.name, name)
        self.save()
        if self.faults.lost_reply_rate and self.random.random() < self.faults.lost_reply_rate:
            raise InternalFailure()
        return result

    def _play_faults(self, operation: str) -> None:
        faults = self.faults
        if operation in faults.deny:
            raise AccessDeniedException(
                f"User: arn:aws:sts::{self.engine.scenario.account_id}:assumed-role/emulated is not authorized to "
                f"perform: sagemaker:{operation} because no identity-based policy allows the sagemaker:{operation} "
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
