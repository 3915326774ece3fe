"""What a task leaves behind about its job: the selection as soon as it is known, the record at the end,
and the failure that says why; used by the operator whichever way it waited.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_sm_prefs.evidence import ledger_entry, ledger_writing
from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.facts.utilization import Utilization
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker import job_status, status_lines
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.task import attempts
from airflow_sm_prefs.task.task_failures import FINISH_SUMMARY_FIELDS, ended_job_error, with_log_tail
from airflow_sm_prefs.wait import announcement

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.preflight.certification import Certification
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook


@dataclass(frozen=True)
class TaskOutcome:
    context: Context
    kind: JobKind
    region: str | None
    log: logging.Logger | logging.LoggerAdapter[Any] | Any
    claims: attempts.ClaimStore  # the task instance's one store, shared with the rest of its life
    certification: Certification | None = None
    # The connection, in the job's Region: where the job's CloudWatch metrics are read. None: not read.
    connection: Connection | None = None

    def announce(self, view: JobView) -> None:
        """The chosen configuration, as soon as SageMaker chose it: a log line, an XCom, a metric."""
        chosen = announcement.selection(view, self.region)
        if chosen is None:
            return
        self.log.info(status_lines.selection_line(view))
        self.context["ti"].xcom_push(key=announcement.XCOM_KEY, value=chosen)
        announcement.emit_selection(chosen)

    def facts_of(self, view: JobView, task_gave_up: bool = False) -> JobFacts:
        """Everything the record, the ledger and the metrics say of the job, computed once. ``task_gave_up``:
        this task stopped waiting on the job (and stopped it unless told not to)."""
        from airflow_sm_prefs.preflight.certification import RegistryUnreachable

        workload = self.certification.workload if self.certification is not None else None
        certified = None
        if workload:
            assert self.certification is not None
            try:
                certified = self.certification.certified_run_seconds(view.selected_type, view.selected_count)
            except RegistryUnreachable as error:  # the job's outcome stands; only the comparison is lost
                self.log.warning("Certified run time left out: %s", error)
        return JobFacts.of(
            view,
            self.region,
            certified_run_seconds=certified,
            workload=workload,
            task_gave_up=task_gave_up,
            utilization=None if task_gave_up else self.utilization_of(view),
        )

    def utilization_of(self, view: JobView) -> Utilization | None:
        """How well the ended job used its hardware, read once from CloudWatch; None (and one warning) when it
        cannot be read: the job's outcome never depends on it."""
        if self.connection is None or view.started is None or view.ended is None or not view.selected_count:
            return None
        from airflow_sm_prefs.facts import utilization
        from airflow_sm_prefs.reference import instance_catalogue
        from airflow_sm_prefs.sagemaker import host_metrics

        assert view.name is not None and view.selected_type is not None
        try:
            values = host_metrics.read(
                host_metrics.client(self.connection),
                kind=view.kind,
                job_name=view.name,
                hosts=view.selected_count,
                started=view.started,
                ended=view.ended,
            )
            found = utilization.summarize(values, instance_catalogue.current().get(view.selected_type))
        except Exception as error:  # no permission, no answer, a catalogue that cannot be read: unknown
            self.log.warning("Utilization of SageMaker %s job %s is unknown: %s", view.kind.name, view.name, error)
            return None
        if not found.known:
            self.log.warning(
                "Utilization of SageMaker %s job %s is unknown: CloudWatch holds no instance metrics for it (yet)",
                view.kind.name,
                view.name,
            )
            return None
        return found

    def record_of(self, facts: JobFacts, claim: attempts.JobClaim | None) -> record.JobRecord:
        """The job's record, with what preflight decided about its list (kept with ``claim``)."""
        decided = claim.preflight if claim is not None and isinstance(claim.preflight, dict) else None
        return record.build(facts, decided)  # type: ignore[arg-type]  # written by submission from Prepared

    def mark_finished(self) -> attempts.JobClaim | None:
        """This try reached the job's outcome: a later try of this task instance is a user's new request. The
        claim as it stood, read once, for the record."""
        claim = self.claims.load()
        if claim is not None:
            self.claims.save(claim.advanced(attempts.FINISHED))
        return claim

    def finish(self, view: JobView, announced: bool, log_tail: Sequence[str] = ()) -> record.JobRecord:
        """The job ended: return its record if it completed, else push the record and raise why it did not
        (ending with ``log_tail``, the job's last log lines, so the reason is in the alert)."""
        claim = self.mark_finished()
        if not announced:
            self.announce(view)
        facts = self.facts_of(view)
        result = self.record_of(facts, claim)
        summary = json.dumps({k: result[k] for k in FINISH_SUMMARY_FIELDS})  # type: ignore[literal-required]
        self.log.info("SageMaker %s job %s ended %s: %s", view.kind.name, view.name, view.status, summary)
        self.record_in_ledger(facts)
        if job_status.succeeded(result["status"]):
            return result
        self.context["ti"].xcom_push(key="record", value=result)
        raise with_log_tail(ended_job_error(view, result), log_tail)

    def record_in_ledger(self, facts: JobFacts) -> None:
        """The job's end, in the capacity ledger and as metrics; never a reason for the task to fail."""
        from airflow_sm_prefs.evidence.metrics import emit_end

        ti = self.context["ti"]
        map_index = getattr(ti, "map_index", -1)
        entry = ledger_entry.entry_for(
            facts,
            dag_id=ti.dag_id,
            task_id=ti.task_id,
            run_id=ti.run_id,
            map_index=-1 if map_index is None else int(map_index),
        )
        ledger_writing.write(entry)
        emit_end(entry)

    def refuse_ended_job(self, view: JobView, reason: str) -> NoReturn:
        """A retry finds the job ended and may not launch another: record it again (a retry starts with no
        XCom) and say again why it ended."""
        result = self.record_of(self.facts_of(view), self.claims.load())
        self.context["ti"].xcom_push(key="record", value=result)
        raise AirflowFailException(f"{ended_job_error(view, result)} Not launched again: {reason}.")

    def abandon(
        self,
        hook: SageMakerPreferenceHook,
        view: JobView,
        *,
        error: type[AirflowException],
        message: str,
        stop: bool,
        left: str,
    ) -> NoReturn:
        """The task stops waiting: stop the job unless told not to, record it, and fail saying which."""
        assert view.name is not None
        claim = self.mark_finished()
        if stop:
            hook.stop_job(self.kind, view.name, self.log)
            # The record shows the job after the stop.
            view = latest_view(hook, view, self.log)
        facts = self.facts_of(view, task_gave_up=True)
        if stop:  # a job left running is not over: a backfill records it once it ends
            self.record_in_ledger(facts)
        self.context["ti"].xcom_push(key="record", value=self.record_of(facts, claim))
        raise error(message + ("; the job was stopped" if stop else f"; the job was left {left}"))


def latest_view(hook: SageMakerPreferenceHook, last_seen: JobView, log: Any) -> JobView:
    """A fresh view of the job for its record; the last one seen if SageMaker cannot be asked right now."""
    assert last_seen.name is not None
    try:
        return JobView.parse(last_seen.kind, hook.describe_job(last_seen.kind, last_seen.name))
    except Exception as error:
        log.info("Could not describe %s for its record (%s); recording the last status seen", last_seen.name, error)
        return last_seen
