"""A local Airflow and SageMaker emulator, both on loopback: what `make demo`, the tests and benchmarks run.

Airflow runs either as `airflow standalone` (the demo) or as one process per component (so a test can kill
one alone). The admin password is the one Airflow generates for each run, never a fixed one; the AWS
connection points at the emulator. The class also speaks the REST calls a user would make (trigger a run,
mark a task failed, clear it) and the emulator's control surface, so callers never hand-write either.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TypeVar

from sm_prefs_devkit.ports import free_port

T = TypeVar("T")

HEALTHY_PARTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
SERVER_ERROR_RETRIES = 4  # tries after the first, for a 5xx answer of the REST API
API_CALL_SECONDS = 30.0  # one REST API call; a read that takes longer is asked again (SERVER_ERROR_RETRIES)


class StackError(RuntimeError):
    """A part of the local stack did not come up or answered with an error."""


def task_log_message(line: str) -> str:
    """What one line of an Airflow task log says: a structured (JSON) line's event, any other line itself."""
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    return str(entry.get("event", "")) if isinstance(entry, dict) else line


def emulator_command(scenario: str | Path, port: int, state_file: Path | None = None) -> list[str]:
    """The emulator as a process of its own, started as users start it (``airflow-sm-prefs emulator``)."""
    command = [sys.executable, "-m", "airflow_sm_prefs.surface.cli", "emulator", "--scenario", str(scenario)]
    command += ["--port", str(port)]
    return command + (["--state-file", str(state_file)] if state_file is not None else [])


def wait_for(check: Callable[[], T], timeout: float, what: str, every: float = 1.0) -> T:
    """Call ``check`` until it returns something true; that value, or TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def control(endpoint_url: str, route: str, body: dict[str, Any] | None = None) -> Any:
    """One call to the emulator's control surface (``GET`` without a body, ``POST`` with one)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"Content-Type": "application/json"}
    request = urllib.request.Request(
        f"{endpoint_url}/_emulator/{route}", data=data, method="GET" if body is None else "POST", headers=headers
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@dataclass
class LocalStack:
    """The emulator and Airflow in ``workdir``; ``scenario`` is a bundled name or a scenario file."""

    project_dir: Path
    workdir: Path
    scenario: str = "gpu-shortage"
    dag_id: str = "nightly_evaluation"
    dags_folder: Path | None = None  # default: the project's dags/
    separate_components: bool = False  # one process per component instead of `airflow standalone`
    # With separate components: each component's name (its log file's) and its `airflow` arguments.
    airflow_components: dict[str, tuple[str, ...]] = field(default_factory=lambda: {c: (c,) for c in COMPONENTS})
    # With separate components: `airflow` commands run after the migration, before any component starts
    # (users and roles an auth manager must know before the DAG processor syncs DAGs' permissions).
    setup_commands: tuple[tuple[str, ...], ...] = ()
    parallelism: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    aws_config_kwargs: dict[str, Any] | None = None  # botocore Config for the connection (retries, ...)
    # ``[sm_prefs] deferral_hold_seconds``. The bundled scenarios run 60 virtual seconds a second, so a job ends
    # seconds after its task deferred and the package's default hold (90 s) would be most of a demo night; this
    # stack's scheduler, lightly loaded, takes a deferring try's exit within 7 s (measured). None: the default,
    # as a stack on a real-time clock should keep.
    deferral_hold_seconds: float | None = 10.0
    emulator_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    components: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    emulator: subprocess.Popen[bytes] | None = None
    # Separate components must sign and check task tokens with one key (standalone makes its own).
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    token: str | None = None
    # The emulator accepts any credentials; these only show that a connection's secret stays out of logs.
    access_key: str = "local-access-key"
    secret_key: str = "local-secret-key"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def emulator_url(self) -> str:
        return f"http://127.0.0.1:{self.emulator_port}"

    @property
    def airflow_home(self) -> Path:
        return self.workdir / "airflow"

    @property
    def ledger_root(self) -> Path:
        """The stack's capacity ledger, as a folder this process can read without an Airflow configuration."""
        return self.shared_copy("ledger")

    # -- the state its components share ([sm_prefs] storage) ---------------------------------------------
    # Here the default: a folder under the one AIRFLOW_HOME every component uses. A stack whose components
    # have homes of their own (tests/production) keeps it on the emulator's S3 instead.

    def shared_copy(self, name: str) -> Path:
        """``name`` under the shared location (``ledger``, ``certified.yaml``, ``prices.json``), readable here."""
        return self.airflow_home / "sm_prefs" / name

    def write_shared(self, name: str, data: bytes) -> None:
        """Put ``name`` in the shared location, as a user's ``airflow-sm-prefs`` command would: whole, so a
        component reading it meanwhile sees the old file or the new one."""
        from airflow_sm_prefs.storage.object_storage import replace_whole

        replace_whole(self.shared_copy(name), data.decode(), prefix=f".{name}.")

    def log_folders(self, under: Path | None = None) -> list[Path]:
        """Where the components write task logs (with one AIRFLOW_HOME, one folder). ``under``, a path relative to
        them, is all the caller reads: a stack that copies the logs from elsewhere may copy only that."""
        return [self.airflow_home / "logs"]

    @property
    def dags(self) -> Path:
        return self.dags_folder or self.project_dir / "dags"

    def airflow_env(self) -> dict[str, str]:
        extra: dict[str, Any] = {"endpoint_url": self.emulator_url, "region_name": "us-east-1"}
        if self.aws_config_kwargs:
            extra["config_kwargs"] = self.aws_config_kwargs
        connection = {"conn_type": "aws", "login": self.access_key, "password": self.secret_key, "extra": extra}
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.airflow_home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection),
                "SM_PREFS_SUMMARY_DIR": str(self.workdir),
                # Airflow starts its components as `airflow ...` found on PATH.
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            }
        )
        if self.separate_components:
            env["AIRFLOW__API_AUTH__JWT_SECRET"] = self.jwt_secret
        if self.deferral_hold_seconds is not None:
            env["AIRFLOW__SM_PREFS__DEFERRAL_HOLD_SECONDS"] = str(self.deferral_hold_seconds)
        env.update(self.extra_env)
        return env

    def component_env(self, component: str) -> dict[str, str]:
        """The environment of one component (or ``setup``: the migration and setup commands)."""
        return self.airflow_env()

    def _spawn(self, command: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.processes.append(process)
        return process

    # -- start and stop -----------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Before anything starts: a fresh metadata database and an emulator with no earlier jobs."""
        if self.airflow_home.exists():
            shutil.rmtree(self.airflow_home)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "emulator-state.json").unlink(missing_ok=True)

    def start(self) -> None:
        self.prepare()
        self.start_emulator()
        self.start_airflow()
        self._wait_healthy(timeout=240)
        self.token = self._login()

    def start_emulator(self) -> subprocess.Popen[bytes]:
        """The emulator on its port, resuming from the state file when one exists (a restart keeps jobs)."""
        state_file = self.workdir / "emulator-state.json"
        self.emulator = self._spawn(emulator_command(self.scenario, self.emulator_port, state_file), "emulator.log")
        wait_for(self._emulator_answers, 30, "the emulator to answer", every=0.2)
        return self.emulator

    def _emulator_answers(self) -> bool:
        if self.emulator is not None and self.emulator.poll() is not None:
            raise StackError(f"the emulator exited early; see {self.workdir}/emulator.log")
        try:
            return bool(control(self.emulator_url, "health")["ok"])
        except OSError:
            return False

    def start_airflow(self) -> None:
        if not self.separate_components:
            self._spawn([sys.executable, "-m", "airflow", "standalone"], "airflow.log", self.airflow_env())
            return
        env = self.component_env("setup")
        migrate = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, timeout=300
        )
        if migrate.returncode != 0:
            raise StackError(f"airflow db migrate failed: {migrate.stderr.decode()[-2000:]}")
        for command in self.setup_commands:
            done = subprocess.run(
                [sys.executable, "-m", "airflow", *command], env=env, capture_output=True, timeout=300
            )
            if done.returncode != 0:
                raise StackError(f"airflow {' '.join(command[:2])} failed: {done.stderr.decode()[-2000:]}")
        for component in self.airflow_components:
            self.start_component(component)

    def start_component(self, component: str) -> None:
        self.components[component] = self._spawn(
            [sys.executable, "-m", "airflow", *self.airflow_components[component]],
            f"{component}.log",
            self.component_env(component),
        )

    def wait_healthy(self, timeout: float = 240) -> None:
        self._wait_healthy(timeout)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise StackError(f"{process.args!r} exited early; see {self.workdir}/*.log")
            try:
                health = self.get("/api/v2/monitor/health", auth=False)
                if all(health.get(part, {}).get("status") == "healthy" for part in HEALTHY_PARTS):
                    return
            except (OSError, StackError):
                pass
            time.sleep(1)
        raise StackError(f"Airflow did not become healthy within {timeout:.0f}s; see the logs in {self.workdir}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()
        self.components.clear()

    def __enter__(self) -> Self:
        """``with stack:`` starts it and stops everything it started on the way out, also when starting fails
        half-way (the processes already up are stopped)."""
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the REST API, as a user -------------------------------------------------------------------------

    def admin_password(self) -> str:
        path = self.airflow_home / "simple_auth_manager_passwords.json.generated"
        return str(json.loads(path.read_text())["admin"])

    def _login(self) -> str:
        return self.login("admin", self.admin_password())

    def login(self, username: str, password: str) -> str:
        """A bearer token for this user, from the auth manager's ``/auth/token``."""
        body = self.request("POST", "/auth/token", {"username": username, "password": password}, auth=False)
        return str(body["access_token"])

    def request(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # A 5xx is what the API server answers when SQLite is busy ("Database error"): its transaction was
        # rolled back, so the request is retried as a user's client would, a few times with a growing pause.
        for attempt in range(SERVER_ERROR_RETRIES + 1):
            request = urllib.request.Request(self.api_url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=API_CALL_SECONDS) as response:
                    return json.loads(response.read() or b"null")
            except urllib.error.HTTPError as error:
                if error.code >= 500 and attempt < SERVER_ERROR_RETRIES:
                    time.sleep(0.5 * 2**attempt)
                    continue
                raise StackError(f"{method} {path}: HTTP {error.code}: {error.read()[:500]!r}") from error
            except (TimeoutError, urllib.error.URLError) as error:
                # A single API server on a saturated machine can let one answer take longer than the deadline: a
                # read is asked again, as a user's client would; anything that changes state is not, since the
                # first request may have been carried out.
                timed_out = isinstance(error, TimeoutError) or isinstance(error.reason, TimeoutError)
                if timed_out and method == "GET" and attempt < SERVER_ERROR_RETRIES:
                    continue
                raise
        raise AssertionError("unreachable")

    def get(self, path: str, auth: bool = True) -> Any:
        return self.request("GET", path, auth=auth)

    def dag_known(self, dag_id: str) -> bool:
        try:
            self.get(f"/api/v2/dags/{dag_id}")
            return True
        except StackError:
            return False

    def trigger(self, dag_id: str, logical_date: str | None = None) -> str:
        """A manual run; without ``logical_date`` it has none (templates using ``ds`` then cannot render)."""
        wait_for(lambda: self.dag_known(dag_id), 120, f"DAG {dag_id} to be parsed", every=2)
        run = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": logical_date})
        return str(run["dag_run_id"])

    def _run_path(self, dag_id: str, run_id: str) -> str:
        return f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get(self._run_path(dag_id, run_id)))

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.dag_run(dag_id, run_id)["state"])

    def wait_run_done(self, dag_id: str, run_id: str, timeout: float = 240) -> str:
        def ended() -> str | None:
            state = self.run_state(dag_id, run_id)
            return state if state in ("success", "failed") else None

        return str(wait_for(ended, timeout, f"run {run_id} of {dag_id} to end", every=2))

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"{self._run_path(dag_id, run_id)}/taskInstances?limit=200")["task_instances"])

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        path = f"{self._run_path(dag_id, run_id)}/taskInstances/{task_id}/xcomEntries/{key}?map_index={map_index}"
        try:
            value = self.get(path)["value"]
        except StackError as error:
            if "HTTP 404" in str(error):
                return None
            raise
        return json.loads(value) if isinstance(value, str) else value

    def task_links(self, dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
        return dict(self.get(f"{self._run_path(dag_id, run_id)}/taskInstances/{task_id}/links")["extra_links"])

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        self.request("PATCH", f"{self._run_path(dag_id, run_id)}/taskInstances/{task_id}", {"new_state": state})

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> None:
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False}
        self.request("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", body)

    def set_run_state(self, dag_id: str, run_id: str, state: str) -> None:
        self.request("PATCH", self._run_path(dag_id, run_id), {"state": state})

    def import_errors(self) -> dict[str, str]:
        errors = self.get("/api/v2/importErrors?limit=500")["import_errors"]
        return {Path(e["filename"]).stem: str(e["stack_trace"]) for e in errors}

    def _try_files(
        self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int, pattern: str
    ) -> list[Path]:
        """One try's log files in every log folder, by when they were last written: a try resumed on another
        worker has a file on each (one folder: Airflow appends to the same file)."""
        relative = Path(f"dag_id={dag_id}") / f"run_id={run_id}" / f"task_id={task_id}"
        if map_index >= 0:
            relative = relative / f"map_index={map_index}"
        found = [
            path
            for folder in self.log_folders(relative)
            for path in (folder / relative).glob(f"attempt={try_number}{pattern}")
        ]
        return sorted(found, key=lambda path: path.stat().st_mtime)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """What the try's workers wrote (not its triggers')."""
        return "".join(
            path.read_text() for path in self._try_files(dag_id, run_id, task_id, try_number, map_index, ".log")
        )

    def try_messages(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> list[str]:
        """Every message of one try, from the worker's log and every triggerer's (``.trigger.<id>.log``),
        each file in order, the files by when they were last written."""
        paths = self._try_files(dag_id, run_id, task_id, try_number, map_index, ".log*")
        return [task_log_message(line) for path in paths for line in path.read_text(errors="replace").splitlines()]

    def task_logs(self, dag_id: str, run_id: str, task_id: str) -> list[str]:
        """The log of every try of an unmapped task instance, first try first."""
        (ti,) = [t for t in self.task_instances(dag_id, run_id) if t["task_id"] == task_id]
        return [self.task_log(dag_id, run_id, task_id, n) for n in range(1, ti["try_number"] + 1)]

    # -- the emulator's side ------------------------------------------------------------------------------

    def jobs(self) -> list[dict[str, Any]]:
        return list(control(self.emulator_url, "jobs")["jobs"])

    def aws_client(self, service: str) -> Any:
        """A boto3 client of the emulator, signed with the stack's connection credentials."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.emulator_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def job_log_lines(self, job_name: str, log_group: str = "/aws/sagemaker/TrainingJobs") -> list[str]:
        """What the job wrote to CloudWatch Logs, as the task log shows it (``[<stream>] <message>``)."""
        pages = (
            self.aws_client("logs")
            .get_paginator("filter_log_events")
            .paginate(logGroupName=log_group, logStreamNamePrefix=f"{job_name}/")
        )
        return [f"[{event['logStreamName']}] {event['message']}" for page in pages for event in page["events"]]

    def calls(self) -> dict[str, int]:
        return dict(control(self.emulator_url, "calls")["calls"])

    def set_capacity(self, capacity: dict[str, int]) -> None:
        control(self.emulator_url, "capacity", capacity)

    def set_faults(self, **faults: Any) -> None:
        control(self.emulator_url, "faults", faults)
