"""Clients through the amazon provider's AWS connection machinery (endpoint_url, role assumption, retries)."""

from __future__ import annotations

from typing import Any

from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook


class SageMakerPreferenceHook(AwsBaseHook):
    """A SageMaker client hook; ``conn`` is a boto3 client, ``get_async_conn()`` an aiobotocore one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["client_type"] = "sagemaker"
        super().__init__(*args, **kwargs)
