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
from airflow.sdk.exceptions import AirflowFailException

from airflow_sm_prefs import attempts, tagging
from airflow_sm_prefs.job_view import JobView
from airflow_sm_prefs.jobs import JobKind

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.task_outcome import TaskOutcome

# The service refused the request itself: sending it again cannot help.
REFUSALS = ("ValidationException", "ResourceLimitExceeded", "ResourceNotFound")


class Submitted(NamedTuple):
    claim: attempts.JobClaim
    # The job an earlier try created, found still running: what it logged so far that try has shown.
    reattached: bool
    # The request as sent (after ``prepare``), or as rendered when no job was created.
    request: dict[str, Any]


class Prepared(NamedTuple):
    """What ``prepare`` makes of the rendered request, just before a job is created from it."""

    request: dict[str, Any]
    pending_until: str | None = None


@dataclass(frozen=True)
class Submission:
    hook: SageMakerPreferenceHook
    kind: JobKind
    # What code outside the task needs to find and stop the job (written into the claim).
    connection: dict[str, Any]
    stop_on_kill: bool
    resubmit_after_failure: bool
    retries: int
    log: logging.Logger | logging.LoggerAdapter[Any] | Any

    def submit(
        self,
        context: Context,
        request: dict[str, Any],
        job_name: str | None,
        outcome: TaskOutcome,
        prepare: Callable[[dict[str, Any]], Prepared] | None = None,
    ) -> Submitted:
        """Decide what this execution does about the task instance's job, do it, and return the claim.

        ``prepare`` (the guardrails) runs only when a job is to be created, before anything is claimed or
        stopped: a retry that reattaches to its running job is never refused by them."""
        kind = self.kind
        ledger = attempts.JobLedger.from_context(context)
        ti = context["ti"]
        raw_map_index = getattr(ti, "map_index", None)
        map_index = -1 if raw_map_index is None else int(raw_map_index)
        base_name = (
            job_name
            or request.get(kind.name_field)
            or attempts.default_base_name(ti.dag_id, ti.task_id, ti.run_id, map_index)
        )
        claim = ledger.load()
        if claim is not None and claim.base_name != base_name:
            claim = None  # the task now renders a different name: it is a different job
        live = self.hook.describe_job_or_none(kind, claim.job_name) if claim else None
        max_tries = getattr(ti, "max_tries", None)
        first_try = attempts.first_try_since_clear(int(max_tries), self.retries) if max_tries is not None else 1
        decision = attempts.decide(
            claim, base_name, live.get(kind.status_field) if live else None, first_try, self.resubmit_after_failure
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
        claim = ledger.save(
            attempts.JobClaim(
                job_name=decision.job_name,
                base_name=base_name,
                generation=decision.generation,
                phase=attempts.SUBMITTING,
                try_number=int(getattr(ti, "try_number", 1) or 1),
                submitted_at=(claim.submitted_at if claim and keeps_job else None) or pendulum.now("UTC").isoformat(),
                job_kind=kind.name,
                aws_conn_id=self.connection["aws_conn_id"],
                region_name=self.connection["region_name"],
                stop_on_kill=self.stop_on_kill,
                verify=self.connection["verify"],
                botocore_config=self.connection["config"],
                pending_until=prepared.pending_until if creates else (claim.pending_until if claim else None),
            )
        )
        if creates:
            ours = tagging.task_instance_tags(ti.dag_id, ti.task_id, ti.run_id, map_index)
            tags = tagging.with_task_instance_tags(request.get("Tags"), ours)
            self.create_or_reattach({**request, kind.name_field: decision.job_name, "Tags": tags})
        reattached = keeps_job and decision.action == "reattach"
        return Submitted(ledger.save(claim.advanced(attempts.SUBMITTED)), reattached, request)

    def create_or_reattach(self, request: dict[str, Any]) -> None:
        """Create the job; a job of that name already there is one an earlier attempt created."""
        from botocore.exceptions import ClientError, ParamValidationError

        from airflow_sm_prefs.hooks import error_code

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
