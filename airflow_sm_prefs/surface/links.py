"""Extra links on the task instance page: the job's SageMaker console page and its CloudWatch logs.

Built on the amazon provider's ``BaseAwsLink`` (partition-aware console domain, values kept in XCom), and
persisted before the task defers so the links work while the job is still queued for capacity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.links.base_aws import BASE_AWS_CONSOLE_LINK, BaseAwsLink

if TYPE_CHECKING:
    from airflow_sm_prefs.request.jobs import JobKind


_NOT_RUNNING_HERE = object()


class _JobLink(BaseAwsLink):
    """A link that exists only once the try has a job: a try refused before submission reads no XCom (Airflow 3
    asks every link for its value as the try ends, and a missing XCom is an error line in the task log). A try's
    XComs start empty, so a job of an earlier try has no link to lose."""

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        # The operator running the try knows (its public ``active_job``); the API server's serialized one has no such
        # attribute, and reads what the try kept.
        if getattr(operator, "active_job", _NOT_RUNNING_HERE) is None:
            return ""
        return str(super().get_link(operator, ti_key=ti_key))


class SageMakerConsoleLink(_JobLink):
    name = "SageMaker job"
    key = "sm_prefs_console_link"
    format_str = BASE_AWS_CONSOLE_LINK + "/sagemaker/home?region={region_name}#/{console_fragment}/{job_name}"


class SageMakerLogsLink(_JobLink):
    name = "CloudWatch logs"
    key = "sm_prefs_logs_link"
    format_str = (
        BASE_AWS_CONSOLE_LINK + "/cloudwatch/home?region={region_name}#logsV2:log-groups/log-group/"
        "{escaped_log_group}$3FlogStreamNameFilter$3D{job_name}"
    )


def escape_log_group(log_group: str) -> str:
    """CloudWatch's console fragment encodes '/' twice ('$252F')."""
    return log_group.replace("/", "$252F")


def persist(context: Any, task: Any, kind: JobKind, job_name: str, *, region: str | None, partition: str) -> None:
    """Both links of the task instance's job, kept in XCom before the task waits."""
    common = {"region_name": region, "aws_partition": partition, "job_name": job_name}
    SageMakerConsoleLink.persist(context, task, console_fragment=kind.console_fragment, **common)
    SageMakerLogsLink.persist(context, task, escaped_log_group=escape_log_group(kind.log_group), **common)
