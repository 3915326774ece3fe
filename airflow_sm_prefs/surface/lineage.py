"""S3 inputs and outputs of a job, for OpenLineage (the same datasets the amazon provider reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from airflow_sm_prefs.request.jobs import JobKind, values_at


def s3_datasets(
    kind: JobKind, request: Mapping[str, Any], description: Mapping[str, Any]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(namespace, name) pairs: ``("s3://bucket", "key/prefix")`` for inputs and outputs."""

    def uris(body: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> list[tuple[str, str]]:
        found = [uri for path in paths for uri in values_at(body, path) if isinstance(uri, str) and uri]
        return [(f"{(parsed := urlparse(u)).scheme}://{parsed.netloc}", parsed.path.lstrip("/")) for u in found]

    inputs = uris(request, kind.input_uri_paths)
    outputs = uris(request, kind.request_output_uri_paths) + uris(description, kind.described_output_uri_paths)
    return inputs, outputs


def operator_lineage(kind: JobKind, request: Mapping[str, Any], description: Mapping[str, Any]) -> Any:
    """The task's OpenLineage facets: its job's S3 inputs and outputs as datasets."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs, outputs = s3_datasets(kind, request, description)
    return OperatorLineage(
        inputs=[Dataset(namespace=n, name=k) for n, k in inputs],
        outputs=[Dataset(namespace=n, name=k) for n, k in outputs],
    )
