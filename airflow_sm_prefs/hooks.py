"""Clients through the amazon provider's AWS connection machinery (endpoint_url, role assumption, retries)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

if TYPE_CHECKING:
    from airflow_sm_prefs.jobs import JobKind


class SageMakerPreferenceHook(AwsBaseHook):
    """A SageMaker client hook; ``conn`` is a boto3 client, ``get_async_conn()`` an aiobotocore one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(*args, **kwargs)


def already_ended(error: BaseException) -> bool:
    """SageMaker answers a stop of a job that has ended with a ValidationException."""
    from botocore.exceptions import ClientError

    return isinstance(error, ClientError) and error.response.get("Error", {}).get("Code") == "ValidationException"


def stop_job(hook: SageMakerPreferenceHook, kind: JobKind, job_name: str, log: logging.Logger | Any) -> None:
    """Best effort: a job that cannot be stopped is logged, never raised, since the caller is giving up on it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        getattr(hook.conn, kind.stop_method)(**{kind.name_field: job_name})
        log.info("Requested stop of SageMaker %s job %s", kind.name, job_name)
    except (BotoCoreError, ClientError) as error:
        if already_ended(error):
            log.info("SageMaker %s job %s had already ended; nothing to stop", kind.name, job_name)
        else:
            log.warning("Could not stop SageMaker %s job %s: %s", kind.name, job_name, error)
