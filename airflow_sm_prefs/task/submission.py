"""Submission: claim the task instance's job name, then create, reattach to, or supersede its job.

The claim is written before the create call reaches SageMaker (see ``attempts``), so whatever happens
between the two, the next execution finds the name and never launches a second job for the same try.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pendulum
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_sm_prefs.preflight.runner import Prepared
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker import tagging
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.task import attempts

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.task.task_outcome import TaskOutcome

# The service refused the request itself: sending it again cannot help.
REFUSALS = ("ValidationException", "ResourceLimitExceeded", "ResourceNotFound")


class Submitted(NamedTuple):
    claim: attempts.JobClaim
    # The job an earlier try created, found still running: what it logged so far that try has shown.
    reattached: bool
    # The request as sent (after ``prepare``), or as rendered when no job was created.
    request: dict[str, Any]


@dataclass(frozen=True)
class Submission:
    hook: SageMakerPreferenceHook
    kind: JobKind
    # What code outside the task needs to find and stop the job (written into the claim).
    connection: Connection
    stop_on_kill: bool
    resubmit_after_failure: bool
    retries: int
    log: logging.Logger | logging.LoggerAdapter[Any] | Any
    claims: attempts.ClaimStore

    def submit(
        self,
        context: Context,
        request: dict[str, Any],
        *,
        job_name: str | None,
        outcome: TaskOutcome,
        prepare: Callable[[dict[str, Any]], Prepared] | None = None,
    ) -> Submitted:
        """Decide what this execution does about the task instance's job, do it, and return the claim.

        ``prepare`` (the guardrails) runs only when a job is to be created, before anything is claimed or
        stopped: a retry that reattaches to its running job is never refused by them."""
        kind = self.kind
        claims = self.claims
        ti = context["ti"]
        raw_map_index = getattr(ti, "map_index", None)
        map_index = -1 if raw_map_index is None else int(raw_map_index)
        base_name = (
            job_name
            or request.get(kind.name_field)
            or attempts.default_base_name(ti.dag_id, ti.task_id, ti.run_id, map_index)
        )
        try_number = int(getattr(ti, "try_number", 1) or 1)
        claim = claims.load()
        if claim is None and not claims.has_store:  # Airflow before 3.3: this try's XCom is empty at first
            claim = self.claim_from_service(base_name, try_number)
        if claim is not None and claim.base_name != base_name:
            claim = None  # the task now renders a different name: it is a different job
        live = self.hook.describe_job_or_none(kind, claim.job_name) if claim else None
        max_tries = getattr(ti, "max_tries", None)
        first_try = attempts.first_try_since_clear(int(max_tries), self.retries) if max_tries is not None else 1
        decision = attempts.decide(
            claim,
            base_name,
            live.get(kind.status_field) if live else None,
            first_try=first_try,
            resubmit_after_failure=self.resubmit_after_failure,
            try_number=try_number,
        )
        self.log.info("SageMaker %s job %s: %s (%s)", kind.name, decision.job_name, decision.action, decision.reason)
        if decision.action == "fail":
            if live is None:
                raise AirflowFailException(decision.reason)
            outcome.refuse_ended_job(JobView.parse(kind, live), decision.reason)
        creates = decision.action in ("create", "supersede")
        prepared = prepare(request) if creates and prepare is not None else Prepared(request)
        request = prepared.request
        if decision.action == "supersede" and claim is not None:
            self.hook.stop_job(kind, claim.job_name, self.log)
        keeps_job = claim is not None and decision.action in ("reattach", "finished")
        pending_until = prepared.pending_until.to_iso8601_string() if prepared.pending_until else None
        claim = claims.save(
            attempts.JobClaim(
                job_name=decision.job_name,
                base_name=base_name,
                generation=decision.generation,
                phase=attempts.SUBMITTING,
                try_number=try_number,
                submitted_at=(claim.submitted_at if claim and keeps_job else None) or pendulum.now("UTC").isoformat(),
                job_kind=kind.name,
                aws_conn_id=self.connection.aws_conn_id,
                region_name=self.connection.region_name,
                stop_on_kill=self.stop_on_kill,
                verify=self.connection.verify,
                botocore_config=self.connection.hook_arguments()["config"],
                pending_until=pending_until if creates else (claim.pending_until if claim else None),
                preflight=dict(prepared.decided) if creates else (claim.preflight if claim else None),
            )
        )
        if creates:
            ours = tagging.task_instance_tags(ti.dag_id, ti.task_id, ti.run_id, map_index, try_number=try_number)
            if pending_until:
                ours[tagging.PENDING_UNTIL] = pending_until
            tags = tagging.with_task_instance_tags(request.get("Tags"), ours)
            self.create_or_reattach({**request, kind.name_field: decision.job_name, "Tags": tags})
        reattached = keeps_job and decision.action == "reattach"
        return Submitted(claims.save(claim.advanced(attempts.SUBMITTED)), reattached, request)

    def claim_from_service(self, base_name: str, try_number: int) -> attempts.JobClaim | None:
        """Airflow before 3.3 keeps no claim: rebuild it from SageMaker, which holds every generation's job
        under a name derived from ``base_name``, tagged with the try that created it.

        A listing can lag a create by moments; a generation it misses is found by the create call instead
        (``ResourceInUse``: reattach), so a lag costs a reattach, never a second job."""
        from airflow_sm_prefs.sagemaker.hooks import error_code

        kind = self.kind
        latest = attempts.latest_generation(
            self.hook.job_names_containing(kind, attempts.name_stem(base_name)), base_name
        )
        if latest is None:
            return None
        generation, job_name = latest
        described = self.hook.describe_job_or_none(kind, job_name)
        tags: dict[str, str] = {}
        if described is not None:
            try:
                tags = self.hook.job_tags(described[kind.arn_field])
            except Exception as error:  # without sagemaker:ListTags, a clear cannot be told from a retry
                self.log.warning("Could not read the tags of job %s (%s)", job_name, error_code(error) or error)
        written = tags.get(tagging.TRY_NUMBER, "")
        if not written.isdigit():
            self.log.warning(
                "Job %s does not say which try created it: treating this try as a retry (reattach, never relaunch)",
                job_name,
            )
        kept_after = tags.get(tagging.KEPT_AFTER_TRY, "")
        return attempts.JobClaim(
            job_name=job_name,
            base_name=base_name,
            generation=generation,
            phase=attempts.KEPT if kept_after.isdigit() else attempts.SUBMITTED,
            try_number=int(written) if written.isdigit() else try_number,
            job_kind=kind.name,
            pending_until=tags.get(tagging.PENDING_UNTIL) or None,
            kept_after_try=int(kept_after) if kept_after.isdigit() else None,
        )

    def create_or_reattach(self, request: dict[str, Any]) -> None:
        """Create the job; a job of that name already there is one an earlier attempt created."""
        from botocore.exceptions import ClientError, ParamValidationError

        from airflow_sm_prefs.sagemaker.hooks import error_code

        name = request[self.kind.name_field]
        try:
            self.hook.create_job(self.kind, request)
        except ParamValidationError as error:
            raise AirflowFailException(
                f"botocore rejected the request before sending it: {error} (no SageMaker job was created)"
            ) from error
        except ClientError as error:
            code = error_code(error)
            if code == "ResourceInUse":
                self.log.info("SageMaker job %s already exists (an earlier attempt created it); reattaching", name)
                return
            if code in REFUSALS:
                message = error.response["Error"].get("Message")
                raise AirflowFailException(
                    f"SageMaker rejected {self.kind.name} job {name}: {code}: {message}"
                ) from error
            raise
        self.log.info("Created SageMaker %s job %s", self.kind.name, name)
