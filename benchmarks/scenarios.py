"""Where benchmarks keep their scenario files, artifacts and result tables (run them as `python -m benchmarks.NAME`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_sm_prefs.sagemaker.connection import Connection

ROOT = Path(__file__).resolve().parents[1]


def write_scenario(name: str, text: str) -> Path:
    """A scenario file kept beside the benchmark's artifacts, so a result can be traced to its settings."""
    path = ROOT / "artifacts" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def publish(table: str, output: Path | None) -> None:
    """Print a result table, and keep it at ``output`` when given (docs/performance.md quotes these)."""
    print(table)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(table)


BENCH_CONNECTION = "sm_bench"


def point_connection_at(endpoint_url: str, region: str = "us-east-1") -> Connection:
    """The benchmarks' AWS connection (``sm_bench``), set in this process's environment to ``endpoint_url``;
    the connection value that uses it."""
    import json
    import os

    from airflow_sm_prefs.sagemaker.connection import Connection

    os.environ[f"AIRFLOW_CONN_{BENCH_CONNECTION.upper()}"] = json.dumps(
        {
            "conn_type": "aws",
            "login": "bench",
            "password": "bench",
            "extra": {"endpoint_url": endpoint_url, "region_name": region},
        }
    )
    return Connection(aws_conn_id=BENCH_CONNECTION, region_name=region)
