"""Request builders and clients shared by the test layers."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Scripts run in a fresh interpreter read the DAG folder with Airflow's DagBag, which moved in 3.2.
IMPORT_DAGBAG = (
    "try:\n    from airflow.dag_processing.dagbag import DagBag  # Airflow 3.2 and later\n"
    "except ImportError:\n    from airflow.models.dagbag import DagBag  # Airflow 3.1\n"
)


async def until_or_ended(task: asyncio.Future, condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Until ``condition()`` holds or ``task`` ended (checked every tenth of a second), however long a busy machine
    takes; fails naming ``what`` after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition() and not task.done():
        assert asyncio.get_running_loop().time() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.1)


def store_work_under_way() -> list[threading.Thread]:
    """Threads still calling the shared store (a bounded call past its deadline, a page's fold of the ledger), of
    the modules loaded so far."""
    prefixes = []
    if (bounded := sys.modules.get("airflow_sm_prefs.storage.bounded")) is not None:
        prefixes.append(bounded.THREAD_PREFIX)
    if (views := sys.modules.get("airflow_sm_prefs.surface.capacity_views")) is not None:
        prefixes.append(views.FOLD_THREAD)
    return [thread for thread in threading.enumerate() if prefixes and thread.name.startswith(tuple(prefixes))]


def in_a_fresh_interpreter(script: str, home: Path, *args: str, cwd: Path | None = None, **env: str) -> dict:
    """Run ``script`` in a clean interpreter (nothing imported yet, no environment of this one but ``env``, Airflow
    at home in ``home``); the JSON its last line prints."""
    base = {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def boto_client(endpoint_url: str, validate: bool = True, service: str = "sagemaker", region: str | None = None) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(parameter_validation=validate, retries={"max_attempts": 1, "mode": "standard"})
    credentials = {**CREDENTIALS, "region_name": region or CREDENTIALS["region_name"]}
    return boto3.client(service, endpoint_url=endpoint_url, config=config, **credentials)


def training_request(name: str, preferences: list[dict[str, Any]] | None = None, **resource: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"VolumeSizeInGB": 100}
    if preferences is not None:
        resources["InstancePreferences"] = copy.deepcopy(preferences)
    resources.update(resource)
    return {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/eval:1",
            "TrainingInputMode": "File",
        },
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
        "ResourceConfig": resources,
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def processing_request(name: str, preferences: list[dict[str, Any]] | None = None, **cluster: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"VolumeSizeInGB": 30}
    if preferences is not None:
        config["InstancePreferences"] = copy.deepcopy(preferences)
    config.update(cluster)
    return {
        "ProcessingJobName": name,
        "RoleArn": ROLE,
        "AppSpecification": {"ImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/prep:1"},
        "ProcessingResources": {"ClusterConfig": config},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


GPU_PAIR = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(_address(address, width))
    return found


def _address(hex_address: str, width: int) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_address)
    # /proc prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words) if width == 8 else ipaddress.IPv6Address(words))


@dataclass
class FakeTI:
    """The task instance an operator sees in its context, as far as this provider reads it."""

    dag_id: str = "nightly"
    task_id: str = "train"
    run_id: str = "manual__2026-11-30"
    map_index: int = -1
    try_number: int = 1
    max_tries: int = 0  # retries=0; Airflow raises it to try_number + retries when a user clears the task
    xcoms: dict[str, Any] = field(default_factory=dict)
    state: str = "running"

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, task_ids: Any = None, key: str = "return_value", **_: Any) -> Any:
        return self.xcoms.get(key)


class TaskLog:
    """Stands in for a trigger's or an operator's logger: what the task log would show."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.said: list[tuple[str, str]] = []  # (level, message), for a test that tells a warning from an info

    @staticmethod
    def _at(level: str) -> Any:
        def record(self: TaskLog, message: str, *args: object, **_: object) -> None:
            text = message % args if args else message
            self.messages.append(text)
            self.said.append((level, text))

        return record

    info, warning, debug, error, exception = (_at("info"), _at("warning"), _at("debug"), _at("error"), _at("exception"))

    @property
    def lines(self) -> list[str]:
        """The jobs' log lines shown (``[<job>/algo-<n>-<epoch>] <message>``)."""
        import re

        return [m for m in self.messages if re.match(r"^\[[^\]/]+/algo-\d+-\d+\] ", m)]


def plant_file(target: Path, kind: str, size: int = 1 << 20) -> Path:
    """Put at ``target`` a file a hostile user could leave where a reader looks: a FIFO (a read blocks), a
    symlink to /dev/zero (a read never ends), a folder, a dangling symlink, a sparse file ``size`` + 1 bytes
    long, JSON nested 100,000 deep, or bytes that are not UTF-8."""
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target.symlink_to("/dev/zero")
    elif kind == "folder":
        target.mkdir()
    elif kind == "dangling symlink":
        target.symlink_to(target.parent / "nowhere")
    elif kind == "huge":
        with target.open("wb") as file:
            file.truncate(size + 1)
    elif kind == "deep":
        target.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "binary":
        target.write_bytes(b"format: 1\n\xff\xfe")
    else:
        raise ValueError(f"no such kind of file: {kind}")
    return target


def capacity_app_for(readable: Any) -> Any:
    """The Capacity page's app for a signed-in user whom the auth manager lets read the DAGs in ``readable``
    (the app's own ``readable_dags`` is left to the caller): Airflow's access checks answered as an auth manager
    would, for the listing routes and for one DAG named in a route's path."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import HTTPException, Request

    from airflow_sm_prefs.surface import capacity_page

    app = capacity_page.create_app()
    access = app.state.dag_access

    def one_dag(request: Request) -> None:
        if request.path_params.get("dag_id") not in readable:
            raise HTTPException(status_code=403, detail="Forbidden")

    # FastAPI reads the annotation to hand over the request: the class itself, not this module's string for it.
    one_dag.__annotations__["request"] = Request

    app.dependency_overrides[get_user] = lambda: object()
    app.dependency_overrides[access.listing] = lambda: None
    app.dependency_overrides[access.task_instances] = one_dag
    return app
