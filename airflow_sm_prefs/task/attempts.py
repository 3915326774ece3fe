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
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from airflow_sm_prefs.request.preferences import MAX_JOB_NAME
from airflow_sm_prefs.sagemaker import job_status
from airflow_sm_prefs.sagemaker.connection import Connection

STATE_KEY = "sm_prefs_job"

# Phases a try writes as it goes, for diagnosis and for code outside the task: "finished" means the try
# reached the job's outcome, so there is nothing left for a user's "mark failed" to stop.
SUBMITTING, SUBMITTED, DEFERRED, RESUMED, BLOCKING = "submitting", "submitted", "deferred", "resumed", "blocking"
FINISHED = "finished"
# The task failed for good for a reason nothing here can attribute (Airflow's deferral race among them) while
# its job may be healthy: the job was left running, and the execution right after that try reattaches to it.
KEPT = "kept"
# Phases in which a worker holds the job in its slot: a final failure then is the worker's loss.
WORKER_HELD = frozenset({SUBMITTING, SUBMITTED, BLOCKING})


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
    # What preflight decided about the list (``record.PreflightDecided``), for the record of whichever try ends.
    preflight: dict[str, Any] | None = None
    # The try that failed while the job was kept running (phase KEPT): the try after it reattaches, even a clear.
    kept_after_try: int | None = None

    @property
    def connection(self) -> Connection:
        """How code outside the task (the listener) reaches the job."""
        return Connection(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)

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
    stem = slug(f"{dag_id[:18]}-{task_id[:30]}")[: MAX_JOB_NAME - 12] or "job"
    return f"{stem}-{digest}"


def generation_name(base_name: str, generation: int) -> str:
    if generation <= 1:
        return base_name
    suffix = f"-r{generation}"
    return base_name[: MAX_JOB_NAME - len(suffix)].rstrip("-") + suffix


def generation_of(job_name: str, base_name: str) -> int | None:
    """The generation ``job_name`` stands for under ``base_name`` (the inverse of :func:`generation_name`)."""
    if job_name == base_name:
        return 1
    found = re.fullmatch(r".+-r([0-9]+)", job_name)
    if found is None or int(found.group(1)) < 2:
        return None
    generation = int(found.group(1))
    return generation if generation_name(base_name, generation) == job_name else None


def name_stem(base_name: str) -> str:
    """What every generation's name contains (a long base is cut to fit the suffix): a listing filter."""
    return base_name[: MAX_JOB_NAME - len("-r999")].rstrip("-")


def latest_generation(job_names: Iterable[str], base_name: str) -> tuple[int, str] | None:
    """The newest generation among ``job_names`` (a listing that may hold other tasks' jobs), if any."""
    found = [(generation, name) for name in job_names if (generation := generation_of(name, base_name))]
    return max(found) if found else None


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
    *,
    first_try: int,
    resubmit_after_failure: bool,
    try_number: int | None = None,
) -> Decision:
    """What this execution should do, given the stored claim and the claimed job's live status.

    ``live_status`` is None when the claimed job does not exist (the earlier try stopped before the create
    call reached SageMaker). ``first_try`` is :func:`first_try_since_clear`; ``try_number`` this execution's try.
    """
    if claim is None:
        return Decision("create", base_name, 1, "no earlier job for this task instance")
    name, generation = claim.job_name, claim.generation
    next_name = generation_name(claim.base_name, generation + 1)
    # A clear right after a try that failed while its job was kept running asks for that job's result, not for
    # a fresh one: nothing ended the job, so nothing asked for it to be replaced.
    kept = claim.kept_after_try is not None and try_number is not None and claim.kept_after_try == try_number - 1
    cleared = claim.try_number < first_try and not kept
    if live_status is None:
        return Decision("create", name, generation, f"job {name} was claimed but never created")
    if job_status.may_still_complete(live_status):
        if kept:
            why = f"job {name} is still {live_status}, kept running after try {claim.kept_after_try} failed"
            return Decision("reattach", name, generation, why)
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
    if job_status.succeeded(live_status):
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
    # Failed, Stopped, Deleting, or Stopping (on its way out, so never worth reattaching to).
    return Decision(
        "create", next_name, generation + 1, f"job {name} ended {live_status}; starting generation {generation + 1}"
    )


class ClaimStore:
    """Where the claim is kept: Airflow 3.3's ``task_state_store``, or, before 3.3, the try's own XCom.

    The XCom serves this try (a resumed task finds the generation it follows) and code outside the task (the
    listener, which reads it from the metadata database). A later try may not find it (Airflow clears a try's
    XComs when the next one starts): the submission then rebuilds the claim from SageMaker, where names are
    deterministic and each job is tagged with the try that created it.
    """

    def __init__(self, store: Any | None, ti: Any | None = None) -> None:
        self._store = store
        self._ti = ti

    @property
    def has_store(self) -> bool:
        return self._store is not None

    @classmethod
    def from_context(cls, context: Any) -> ClaimStore:
        try:
            store = context["task_state_store"]
        except (KeyError, TypeError):
            store = None
        try:
            ti = context["ti"]
        except (KeyError, TypeError):
            ti = None
        return cls(store, ti)

    def load(self) -> JobClaim | None:
        if self._store is not None:
            return JobClaim.from_stored(self._store.get(STATE_KEY))
        if self._ti is None:
            return None
        map_index = getattr(self._ti, "map_index", None)
        return JobClaim.from_stored(
            self._ti.xcom_pull(
                task_ids=self._ti.task_id, key=STATE_KEY, map_indexes=-1 if map_index is None else map_index
            )
        )

    def save(self, claim: JobClaim) -> JobClaim:
        if self._store is not None:
            self._store.set(STATE_KEY, asdict(claim))
        elif self._ti is not None:
            self._ti.xcom_push(key=STATE_KEY, value=asdict(claim))
        return claim
