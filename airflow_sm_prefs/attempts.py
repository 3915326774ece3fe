"""Which SageMaker job belongs to a task instance, across retries, crashes, deferrals and clears.

The job name is fixed once per task instance and written to Airflow 3.3's ``task_state_store`` *before*
the create call, with the try that wrote it and the phase it reached. A later execution reads it back and
decides, from the job's live status and whether a user cleared the task since, to reattach, to report the
finished job, or to start the next *generation* (``<name>-r2``, ...), so no path launches a job twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

STATE_KEY = "sm_prefs_job"
MAX_NAME = 63

# Phases a try writes as it goes, for diagnosis and for code outside the task: "finished" means the try
# reached the job's outcome, so there is nothing left for a user's "mark failed" to stop.
SUBMITTING, SUBMITTED, DEFERRED, RESUMED, BLOCKING = "submitting", "submitted", "deferred", "resumed", "blocking"
FINISHED = "finished"


def hook_kwargs(
    aws_conn_id: str | None, region_name: str | None, verify: bool | str | None, botocore_config: dict[str, Any] | None
) -> dict[str, Any]:
    """``SageMakerPreferenceHook`` arguments: how the task, its trigger and the listener all reach the job."""
    return {"aws_conn_id": aws_conn_id, "region_name": region_name, "verify": verify, "config": botocore_config}


@dataclass(frozen=True)
class JobClaim:
    job_name: str
    base_name: str
    generation: int
    phase: str
    try_number: int
    submitted_at: str | None = None
    # Where the job lives and whether a user's "mark failed" should stop it: what code outside the task
    # (the listener in the API server) needs to act on the claim.
    job_kind: str | None = None
    aws_conn_id: str | None = None
    region_name: str | None = None
    stop_on_kill: bool = True
    verify: bool | str | None = None
    botocore_config: dict[str, Any] | None = None
    # When a job still waiting for capacity must be stopped by the task itself (finish_by= below SageMaker's
    # pending floor, or processing), kept with the claim so a retry that reattaches keeps the same bound.
    pending_until: str | None = None

    @property
    def hook_kwargs(self) -> dict[str, Any]:
        return hook_kwargs(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)

    @classmethod
    def from_stored(cls, raw: Any) -> JobClaim | None:
        """The claim from what a state store returns (a dict, or its JSON text); None if unreadable."""
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw)
            except ValueError:
                return None
        if not isinstance(raw, dict):
            return None
        try:
            return cls(**raw)
        except TypeError:
            return None

    def advanced(self, phase: str, **changes: Any) -> JobClaim:
        return replace(self, phase=phase, **changes)


Action = Literal["create", "reattach", "finished", "fail", "supersede"]  # supersede: stop the old job, create anew


@dataclass(frozen=True)
class Decision:
    action: Action
    job_name: str
    generation: int
    reason: str


def slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9]", "-", text)).strip("-").lower()


def default_base_name(dag_id: str, task_id: str, run_id: str, map_index: int) -> str:
    """Deterministic per task instance, so even without the state store a retry finds the same job."""
    digest = hashlib.sha256(f"{dag_id}\0{task_id}\0{run_id}\0{map_index}".encode()).hexdigest()[:10]
    stem = slug(f"{dag_id[:18]}-{task_id[:30]}")[: MAX_NAME - 12] or "job"
    return f"{stem}-{digest}"


def generation_name(base_name: str, generation: int) -> str:
    if generation <= 1:
        return base_name
    suffix = f"-r{generation}"
    return base_name[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def first_try_since_clear(max_tries: int, retries: int) -> int:
    """The first try of the task instance's current run: Airflow raises ``max_tries`` on every clear.

    Tries from this one on are retries (a crash, a failed resume, Airflow failing the try itself); a claim
    written by an earlier try means a user cleared the task since, asking for a fresh run. This is the
    formula Airflow itself uses to find the first try after a clear (``get_first_reschedule_date``).
    """
    return max(1, max_tries - retries + 1)


def decide(
    claim: JobClaim | None,
    base_name: str,
    live_status: str | None,
    first_try: int,
    resubmit_after_failure: bool,
) -> Decision:
    """What this execution should do, given the stored claim and the claimed job's live status.

    ``live_status`` is None when the claimed job does not exist (the earlier try stopped before the create
    call reached SageMaker). ``first_try`` is :func:`first_try_since_clear`.
    """
    if claim is None:
        return Decision("create", base_name, 1, "no earlier job for this task instance")
    name, generation = claim.job_name, claim.generation
    next_name = generation_name(claim.base_name, generation + 1)
    cleared = claim.try_number < first_try
    if live_status is None:
        return Decision("create", name, generation, f"job {name} was claimed but never created")
    if live_status == "InProgress":
        if cleared:
            # The user asked for a fresh run while the job ran; the old try's on_kill may be stopping it
            # right now, so reattaching would follow a job that is about to stop.
            return Decision(
                "supersede",
                next_name,
                generation + 1,
                f"the task was cleared while job {name} ran (try {claim.try_number}); stopping it and starting afresh",
            )
        return Decision("reattach", name, generation, f"job {name} is still {live_status}")
    if live_status == "Completed":
        if cleared:
            return Decision(
                "create",
                next_name,
                generation + 1,
                f"the task was cleared after job {name} completed; starting generation {generation + 1}",
            )
        return Decision("finished", name, generation, f"job {name} already completed")
    if not resubmit_after_failure:
        return Decision("fail", name, generation, f"job {name} ended {live_status} and resubmit_after_failure is off")
    # Failed, Stopped, or Stopping (on its way out, so never worth reattaching to).
    return Decision(
        "create", next_name, generation + 1, f"job {name} ended {live_status}; starting generation {generation + 1}"
    )


class JobLedger:
    """The claim in ``task_state_store``; a no-op without one (names stay deterministic regardless)."""

    def __init__(self, store: Any | None) -> None:
        self._store = store

    @classmethod
    def from_context(cls, context: Any) -> JobLedger:
        try:
            store = context["task_state_store"]
        except (KeyError, TypeError):
            store = None
        return cls(store)

    def load(self) -> JobClaim | None:
        if self._store is None:
            return None
        return JobClaim.from_stored(self._store.get(STATE_KEY))

    def save(self, claim: JobClaim) -> JobClaim:
        if self._store is not None:
            self._store.set(STATE_KEY, asdict(claim))
        return claim
