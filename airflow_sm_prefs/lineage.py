"""S3 inputs and outputs of a job, for OpenLineage (the same datasets the amazon provider reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from airflow_sm_prefs.jobs import JobKind


def _uris(kind: JobKind, request: Mapping[str, Any], description: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    if kind.name == "training":
        inputs = [
            channel.get("DataSource", {}).get("S3DataSource", {}).get("S3Uri")
            for channel in request.get("InputDataConfig") or []
        ]
        outputs = [description.get("ModelArtifacts", {}).get("S3ModelArtifacts")]
    else:
        inputs = [item.get("S3Input", {}).get("S3Uri") for item in request.get("ProcessingInputs") or []]
        outputs = [
            item.get("S3Output", {}).get("S3Uri")
            for item in (request.get("ProcessingOutputConfig") or {}).get("Outputs") or []
        ]
    return [u for u in inputs if u], [u for u in outputs if u]


def s3_datasets(
    kind: JobKind, request: Mapping[str, Any], description: Mapping[str, Any]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(namespace, name) pairs: ``("s3://bucket", "key/prefix")`` for inputs and outputs."""

    def split(uri: str) -> tuple[str, str]:
        parsed = urlparse(uri)
        return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")

    inputs, outputs = _uris(kind, request, description)
    return [split(u) for u in inputs], [split(u) for u in outputs]
