"""How a job that did not complete fails the task: the message a user needs, and the exception that says it."""

from __future__ import annotations

from collections.abc import Sequence

from airflow.providers.common.compat.sdk import AirflowException

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.facts.record import JobRecord
from airflow_sm_prefs.platform.formatting import format_seconds
from airflow_sm_prefs.sagemaker.job_view import JobView

FINISH_SUMMARY_FIELDS = (
    "selected_instance_type",
    "selected_instance_count",
    "selected_rank",
    "pending_seconds",
    "run_seconds",
    "billable_seconds",
    "estimated_cost_usd",
    "cost_basis",
)


class NoCapacityError(SageMakerPreferencesError, AirflowException):
    """SageMaker never found capacity for any preference within the allowed wait."""


def with_log_tail(error: AirflowException, lines: Sequence[str]) -> AirflowException:
    """The same error, its message ending with the job's last log lines."""
    if not lines:
        return error
    return type(error)(f"{error}\nLast {len(lines)} lines of the job's log:\n" + "\n".join(lines))


def ended_job_error(view: JobView, record: JobRecord) -> AirflowException:
    """Why a job that ended without completing failed the task, in the words a user needs."""
    status = record["status"]
    kind = view.kind.name
    if record["selected_instance_type"] is None:
        waited = format_seconds(record["pending_seconds"])
        return NoCapacityError(
            f"SageMaker {kind} job {record['job_name']} ended {status} without ever getting capacity "
            f"after waiting {waited} for any of: {view.describe_preferences()}. "
            f"{record['failure_reason'] or ''}".strip()
        )
    cause, rule = record["failure_cause"], record["failure_cause_rule"]
    reason = record["failure_reason"] or view.secondary_status
    if cause == "configuration":
        # The request failed, not the instance: naming the instance type would send the reader to the wrong list.
        return AirflowException(
            f"SageMaker {kind} job {record['job_name']} ended {status} on its request itself: {reason}. Fix the "
            "request (its buckets, data, permissions): every configuration in the list would fail the same way."
        )
    where = (
        f"{record['selected_instance_count']} x {record['selected_instance_type']} "
        f"(preference #{(record['selected_rank'] or 0) + 1})"
    )
    hint = (
        " It ran on a fallback type: SageMaker does not check that your container works on every preference, and "
        f"this failure points at the hardware ({rule})."
        if record["fell_back"] and cause == "hardware"
        else ""
    )
    return AirflowException(f"SageMaker {kind} job {record['job_name']} ended {status} on {where}: {reason}.{hint}")


def no_capacity_message(view: JobView, bound: str = "within max_pending") -> str:
    return (
        f"SageMaker {view.kind.name} job {view.name} got no capacity {bound} "
        f"({format_seconds(view.pending_seconds())} waited) for any of: {view.describe_preferences()}"
    )


def wait_timeout_message(view: JobView) -> str:
    return f"SageMaker {view.kind.name} job {view.name} was still {view.status} when wait_timeout expired"
