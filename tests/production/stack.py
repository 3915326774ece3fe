"""The production topology of docker-compose.yaml, on this machine without Docker: PostgreSQL as the metadata
database, Redis as the Celery broker, the API server, scheduler and DAG processor, two Celery workers and two
triggerers, plus the emulator; every one on 127.0.0.1.

Each component is a host of its own: its own ``AIRFLOW_HOME`` and working folder, sharing with the others only
what separate hosts share (PostgreSQL, Redis, the DAG folder, and the emulator's S3 for ``[sm_prefs] storage``
and the task logs, shipped there by Airflow's remote logging). The shared store is reached through a
connection of its own (``[sm_prefs] storage_conn_id = sm_prefs_store``) whose endpoint is a proxy in front of
the emulator's S3 (tests/faulty_store.py), so a scenario can stop the store while SageMaker keeps answering.
The test harness, and a user's ``airflow`` or ``airflow-sm-prefs`` command, is one more host (``cli``). It
reads the shared state and the task logs from S3, where the API server reads them.

It is the fault campaign's stack (tests/faults) with those parts swapped in, so the campaign's scenarios run
on it unchanged. The workers and triggerers do not serve logs (two on one host would clash on the port): the
API server reads a finished task's log from S3.

Also runnable by hand (`make stack`): python -m tests.production.stack
"""

from __future__ import annotations

import secrets
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sm_prefs_devkit.local_stack import LocalStack, wait_for
from tests.faults.stack import CampaignStack
from tests.faulty_store import FaultyStore
from tests.production.services import Services

HEARTBEAT_TIMEOUT = 45
SHARED_BUCKET = "sm-prefs-shared"  # [sm_prefs] storage
SHARED_PREFIX = "team-a"
STORE_CONN_ID = "sm_prefs_store"  # [sm_prefs] storage_conn_id: the emulator's S3 behind the proxy (``store``)
LOGS_BUCKET = "airflow-logs"  # [logging] remote_base_log_folder
LOG_SHIPPING_TIMEOUT = 60


def _new_fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def components(workers: int = 2, triggerers: int = 2) -> dict[str, tuple[str, ...]]:
    names = {"api-server": ("api-server",), "scheduler": ("scheduler",), "dag-processor": ("dag-processor",)}
    for number in range(1, triggerers + 1):
        names[f"triggerer-{number}"] = ("triggerer", "--skip-serve-logs")
    for number in range(1, workers + 1):
        names[f"celery-worker-{number}"] = (
            "celery",
            "worker",
            "--celery-hostname",
            f"worker-{number}@%h",
            "--concurrency",
            "4",
            "--skip-serve-logs",
        )
    return names


@dataclass
class ProductionTopology:
    """Any local stack on the production topology: put this class before the stack's class in the bases.

    Not a LocalStack itself: a dataclass base carries every inherited field's default, and would put back
    the defaults the stack's own class changed."""

    services: Services = field(default_factory=Services)
    separate_components: bool = True
    airflow_components: dict[str, tuple[str, ...]] = field(default_factory=components)
    # What a deployment's secrets hold once for every host (the Helm chart's fernet and API secret keys): a
    # home of its own would otherwise make its own, and no host could read what another encrypted or signed.
    fernet_key: str = field(default_factory=_new_fernet_key)
    api_secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _store: FaultyStore | None = None

    @property
    def store(self) -> FaultyStore:
        """The proxy every host reaches the shared store through: a scenario sets its ``fault``."""
        if self._store is None:
            self._store = FaultyStore(self.emulator_url)  # type: ignore[attr-defined]
        return self._store

    # -- one host per component ---------------------------------------------------------------------------

    def home_of(self, host: str) -> Path:
        return self.workdir / "hosts" / host  # type: ignore[attr-defined]

    @property
    def airflow_home(self) -> Path:
        """The API server's host: where Airflow writes the admin password it generated for this run."""
        return self.home_of("api-server")

    def airflow_env(self) -> dict[str, str]:
        """A user's ``airflow`` command on a host of its own (``cli``)."""
        env: dict[str, str] = super().airflow_env()  # type: ignore[misc]
        env.update(self.services.airflow_env())
        # A lost worker's task is failed (and retried) once its heartbeat is this old: 5 minutes by default,
        # shortened so the campaign's lost-worker scenario fits a test run.
        env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] = str(HEARTBEAT_TIMEOUT)
        env.update(
            {
                "AIRFLOW_HOME": str(self.home_of("cli")),
                "AIRFLOW__CORE__FERNET_KEY": self.fernet_key,
                "AIRFLOW__API__SECRET_KEY": self.api_secret_key,
                "AIRFLOW__SM_PREFS__STORAGE": f"s3://{SHARED_BUCKET}/{SHARED_PREFIX}",
                "AIRFLOW__SM_PREFS__STORAGE_CONN_ID": STORE_CONN_ID,
                f"AIRFLOW_CONN_{STORE_CONN_ID.upper()}": self._store_connection(env),
                "AIRFLOW__LOGGING__REMOTE_LOGGING": "True",
                "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER": f"s3://{LOGS_BUCKET}/logs",
                "AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID": "aws_default",
            }
        )
        return env

    def _store_connection(self, env: dict[str, str]) -> str:
        """The stack's AWS connection, its endpoint the store's proxy."""
        import json

        connection = json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])
        connection["extra"] = {**connection["extra"], "endpoint_url": self.store.endpoint_url}
        return json.dumps(connection)

    def component_env(self, component: str) -> dict[str, str]:
        home = self.home_of(component)
        home.mkdir(parents=True, exist_ok=True)
        return {**self.airflow_env(), "AIRFLOW_HOME": str(home)}

    def hosts(self) -> list[Path]:
        folder = self.workdir / "hosts"  # type: ignore[attr-defined]
        return sorted(path for path in folder.iterdir() if path.is_dir()) if folder.exists() else []

    def log_folders(self, under: Path | None = None) -> list[Path]:
        """The task logs where the API server reads them: on S3, where each host ships its own (and empties its
        local file once shipped), a try's file and its triggers' each one object. Only those ``under`` are copied."""
        prefix = "logs" if under is None else f"logs/{under.as_posix()}"
        return [self._download(LOGS_BUCKET, prefix) / "logs"]

    def task_logs(self, dag_id: str, run_id: str, task_id: str) -> list[str]:
        """As on one host, once a finished task's last try is on S3. Its worker ships the log only after the
        try's state is set (the supervisor uploads last), so a reader that saw the run end could otherwise take
        a log not shipped yet, or only its part from before a deferral, for the whole."""
        (ti,) = [t for t in self.task_instances(dag_id, run_id) if t["task_id"] == task_id]  # type: ignore[attr-defined]
        if ti["end_date"]:
            # S3 dates an object to the second: the end, to the second, is as late as the last upload can be dated.
            ended = int(datetime.fromisoformat(ti["end_date"]).timestamp())

            def shipped() -> bool:
                files = self._try_files(dag_id, run_id, task_id, ti["try_number"], -1, ".log")  # type: ignore[attr-defined]
                return any(path.stat().st_mtime >= ended for path in files)

            what = f"try {ti['try_number']} of {dag_id}.{task_id} to be shipped to S3"
            wait_for(shipped, LOG_SHIPPING_TIMEOUT, what, every=2)
        return super().task_logs(dag_id, run_id, task_id)  # type: ignore[misc,no-any-return]

    def prepare(self) -> None:
        shutil.rmtree(self.workdir / "hosts", ignore_errors=True)  # type: ignore[attr-defined]
        super().prepare()  # type: ignore[misc]

    # -- the shared location: the emulator's S3 -------------------------------------------------------------

    def start_emulator(self):  # type: ignore[no-untyped-def]
        emulator = super().start_emulator()  # type: ignore[misc]
        s3 = self.aws_client("s3")  # type: ignore[attr-defined]
        for bucket in (SHARED_BUCKET, LOGS_BUCKET):
            s3.create_bucket(Bucket=bucket)
        return emulator

    def shared_copy(self, name: str) -> Path:
        """A fresh copy of ``name`` (a file, or a folder's objects) from the shared location."""
        return self._download(SHARED_BUCKET, f"{SHARED_PREFIX}/{name}") / SHARED_PREFIX / name

    def _download(self, bucket: str, prefix: str) -> Path:
        """A fresh local folder with a copy of the objects under ``prefix/``, or of the object ``prefix``, each at
        its key and dated by its object's LastModified."""
        import os

        s3 = self.aws_client("s3")  # type: ignore[attr-defined]
        copy = self.workdir / "downloaded" / str(time.monotonic_ns())  # type: ignore[attr-defined]
        copy.mkdir(parents=True)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for listed in page.get("Contents", []):
                key = listed["Key"]
                if key != prefix and not key.startswith(prefix + "/"):
                    continue  # a neighbour whose name starts with this one's
                target = copy / key
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
                modified = listed["LastModified"].timestamp()
                os.utime(target, (modified, modified))
        return copy

    def write_shared(self, name: str, data: bytes) -> None:
        self.aws_client("s3").put_object(Bucket=SHARED_BUCKET, Key=f"{SHARED_PREFIX}/{name}", Body=data)  # type: ignore[attr-defined]

    def start(self) -> None:
        # Start with ``with stack:``: a start that fails half-way then stops the services too.
        self.services.start()
        super().start()  # type: ignore[misc]

    def stop(self) -> None:
        try:
            super().stop()  # type: ignore[misc]
        finally:
            self.services.stop()
            if self._store is not None:
                self._store.stop()


@dataclass
class ProductionDemoStack(ProductionTopology, LocalStack):
    """The demo's stack (the project's DAGs, the weather scenario) on the production topology."""


@dataclass
class ProductionStack(ProductionTopology, CampaignStack):
    """The fault campaign's stack on the production topology."""

    def kill_component(self, component: str) -> None:
        # The campaign kills "the triggerer": here, the first of two (the second must take its triggers over).
        super().kill_component("triggerer-1" if component == "triggerer" else component)

    def start_component(self, component: str) -> None:
        super().start_component("triggerer-1" if component == "triggerer" else component)


def main() -> int:
    workdir = Path(sys.argv[1] if len(sys.argv) > 1 else ".stack").resolve()
    stack = ProductionStack(project_dir=Path(__file__).resolve().parents[2], workdir=workdir)
    print("Starting PostgreSQL, Redis, the emulator and Airflow (2 Celery workers, 2 triggerers) ...", flush=True)
    try:
        with stack:
            print(
                f"Up: Airflow {stack.api_url}, emulator {stack.emulator_url}, {stack.services.database_url}, "
                f"{stack.services.broker_url}; logs in {workdir}. Ctrl-C stops and removes everything.",
                flush=True,
            )
            while all(process.poll() is None for process in stack.processes):
                time.sleep(1)
            print("a component exited; see the logs", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
