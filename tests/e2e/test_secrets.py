"""A secret in a job's Environment and HyperParameters never lands in Airflow's metadata database or logs:
not while the task is deferred waiting for capacity (the trigger's event and ``next_kwargs``), not after.

The secrets are an Airflow Variable's value and a connection's password that the templates read, as users pass
credentials; SageMaker itself (the emulator) has to receive them, which the test checks too, so a test that
planted nothing cannot pass.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from sm_prefs_devkit.local_stack import LocalStack, wait_for

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]

PROJECT = Path(__file__).resolve().parents[2]
SECRET = "planted-" + secrets.token_hex(12)
CONNECTION_SECRET = "planted-password-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    workdir = tmp_path_factory.mktemp("secrets")
    # The demo's shortage, with containers that print their environment when they start: the job's log lines,
    # which the triggerer streams into the task log, carry the secret.
    scenario = workdir / "echoing-gpu-shortage.yaml"
    bundled = resources.files("sm_prefs_devkit.emulator").joinpath("scenarios", "gpu-shortage.yaml")
    scenario.write_text(bundled.read_text() + "\necho_environment: true\n")
    stack = LocalStack(
        project_dir=PROJECT,
        workdir=workdir,
        scenario=str(scenario),
        dag_id="secret_in_job",
        dags_folder=PROJECT / "tests" / "e2e" / "dags",
        extra_env={
            "AIRFLOW_VAR_SM_PREFS_API_TOKEN": SECRET,
            "AIRFLOW_CONN_SM_PREFS_REGISTRY": json.dumps({"conn_type": "generic", "password": CONNECTION_SECRET}),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        },
    )
    with stack:
        yield stack


def _places_holding(stack: LocalStack, text: str) -> list[str]:
    """Every table row and every log file under the stack that contains ``text``."""
    found = []
    database = stack.airflow_home / "airflow.db"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    raw = value if isinstance(value, bytes) else str(value).encode()
                    if text.encode() in raw:
                        found.append(f"table {table}")
    for path in [*stack.airflow_home.rglob("*.log"), *stack.workdir.glob("*.log")]:
        if text.encode() in path.read_bytes():
            found.append(f"log {path.relative_to(stack.workdir)}")
    return sorted(set(found))


def _emulated_job(stack: LocalStack) -> dict:
    (job,) = [j for j in stack.jobs() if j["tags"].get("airflow:dag_id") == "secret_in_job"]
    return job


def test_a_secret_in_the_job_stays_out_of_the_database_and_logs(stack):
    stack.set_capacity({"ml.p5.48xlarge": 0, "ml.p4d.24xlarge": 0})
    wait_for(lambda: stack.dag_known("secret_in_job"), 120, "the DAG to be parsed")
    run_id = stack.trigger("secret_in_job")

    def deferred() -> bool:
        states = {ti["task_id"]: ti["state"] for ti in stack.task_instances("secret_in_job", run_id)}
        return states.get("train") == "deferred"

    wait_for(deferred, 180, "the task to defer while its job waits for capacity")
    job = _emulated_job(stack)
    assert job["pending"] is True, "the job is queued while the task is deferred"
    sent = (stack.workdir / "emulator-state.json").read_text()
    assert SECRET in sent and CONNECTION_SECRET in sent, "SageMaker received the secrets"
    assert _places_holding(stack, SECRET) == _places_holding(stack, CONNECTION_SECRET) == [], "while the job waits"

    stack.set_capacity({"ml.p4d.24xlarge": 1})
    assert stack.wait_run_done("secret_in_job", run_id, timeout=300) == "success"
    echoed = [m for m in stack.try_messages("secret_in_job", run_id, "train", 1) if "env WANDB_API_KEY=" in m]
    assert echoed and all(line.endswith("env WANDB_API_KEY=***") for line in echoed), "the triggerer masked it"
    password = [m for m in stack.try_messages("secret_in_job", run_id, "train", 1) if "env REGISTRY_PASSWORD=" in m]
    assert password and all(line.endswith("env REGISTRY_PASSWORD=***") for line in password), "and the password"
    assert _places_holding(stack, SECRET) == _places_holding(stack, CONNECTION_SECRET) == [], "after the job ended"
    record = stack.xcom("secret_in_job", run_id, "train")
    assert record["selected_instance_type"] == "ml.p4d.24xlarge"
