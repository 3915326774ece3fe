"""Extra links on the task instance page: the job's SageMaker console page and its CloudWatch logs.

Built on the amazon provider's ``BaseAwsLink`` (partition-aware console domain, values kept in XCom), and
persisted before the task defers so the links work while the job is still queued for capacity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.links.base_aws import BASE_AWS_CONSOLE_LINK, BaseAwsLink

if TYPE_CHECKING:
    from airflow_sm_prefs.request.jobs import JobKind


class SageMakerConsoleLink(BaseAwsLink):
    name = "SageMaker job"
    key = "sm_prefs_console_link"
    format_str = BASE_AWS_CONSOLE_LINK + "/sagemaker/home?region={region_name}#/{console_fragment}/{job_name}"


class SageMakerLogsLink(BaseAwsLink):
    name = "CloudWatch logs"
    key = "sm_prefs_logs_link"
    format_str = (
        BASE_AWS_CONSOLE_LINK + "/cloudwatch/home?region={region_name}#logsV2:log-groups/log-group/"
        "{escaped_log_group}$3FlogStreamNameFilter$3D{job_name}"
    )


def escape_log_group(log_group: str) -> str:
    """CloudWatch's console fragment encodes '/' twice ('$252F')."""
    return log_group.replace("/", "$252F")


def persist(context: Any, task: Any, kind: JobKind, region: str | None, partition: str, job_name: str) -> None:
    """Both links of the task instance's job, kept in XCom before the task waits."""
    common = {"region_name": region, "aws_partition": partition, "job_name": job_name}
    SageMakerConsoleLink.persist(context, task, console_fragment=kind.console_fragment, **common)
    SageMakerLogsLink.persist(context, task, escaped_log_group=escape_log_group(kind.log_group), **common)
