"""`make demo`: the emulator plus a real Airflow (`airflow standalone`), the nightly pipeline, a results table.

Everything binds to 127.0.0.1; the admin password is the one Airflow generates for this run (never a fixed
one). The same stack is what the end-to-end test drives, headless.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAGEMAKER_TASKS = ("prepare_data", "fine_tune")
HEALTHY_PARTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DemoError(RuntimeError):
    pass


@dataclass
class DemoStack:
    """The emulator and an `airflow standalone`, both on loopback, in ``workdir``."""

    project_dir: Path
    workdir: Path
    scenario: str = "gpu-shortage"
    dag_id: str = "nightly_evaluation"
    emulator_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    token: str | None = None
    # The emulator accepts any credentials; these only show that a connection's secret stays out of logs.
    access_key: str = "demo-access-key"
    secret_key: str = "demo-secret-key"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def emulator_url(self) -> str:
        return f"http://127.0.0.1:{self.emulator_port}"

    @property
    def airflow_home(self) -> Path:
        return self.workdir / "airflow"

    def airflow_env(self) -> dict[str, str]:
        connection = {
            "conn_type": "aws",
            "login": self.access_key,
            "password": self.secret_key,
            "extra": {"endpoint_url": self.emulator_url, "region_name": "us-east-1"},
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.airflow_home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.project_dir / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__PARALLELISM": "2",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
                "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(connection),
                "SM_PREFS_SUMMARY_DIR": str(self.workdir),
                # `airflow standalone` starts its components as `airflow ...` found on PATH.
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            }
        )
        return env

    def _spawn(self, command: list[str], log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.workdir / log_name, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.processes.append(process)
        return process

    def start(self) -> None:
        # Every demo starts from scratch: a fresh metadata database and an emulator with no earlier jobs.
        if self.airflow_home.exists():
            shutil.rmtree(self.airflow_home)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "emulator-state.json").unlink(missing_ok=True)
        self.start_emulator()
        self.start_airflow()
        self._wait_healthy(timeout=240)
        self.token = self._login()

    def start_emulator(self) -> subprocess.Popen[bytes]:
        """The emulator on its port, resuming from the state file when one exists (a restart keeps jobs)."""
        return self._spawn(
            [
                sys.executable,
                "-m",
                "airflow_sm_prefs.cli",
                "emulator",
                "--scenario",
                self.scenario,
                "--port",
                str(self.emulator_port),
                "--state-file",
                str(self.workdir / "emulator-state.json"),
            ],
            "emulator.log",
        )

    def start_airflow(self) -> None:
        self._spawn([sys.executable, "-m", "airflow", "standalone"], "airflow.log", self.airflow_env())

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise DemoError(f"{process.args!r} exited early; see {self.workdir}/*.log")
            try:
                health = self._get("/api/v2/monitor/health", auth=False)
                if all(health.get(part, {}).get("status") == "healthy" for part in HEALTHY_PARTS):
                    return
            except (OSError, DemoError):
                pass
            time.sleep(1)
        raise DemoError(f"Airflow did not become healthy within {timeout:.0f}s; see {self.workdir}/airflow.log")

    def admin_password(self) -> str:
        path = self.airflow_home / "simple_auth_manager_passwords.json.generated"
        return str(json.loads(path.read_text())["admin"])

    def _login(self) -> str:
        body = self._request(
            "POST", "/auth/token", {"username": "admin", "password": self.admin_password()}, auth=False
        )
        return str(body["access_token"])

    def _request(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.api_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise DemoError(f"{method} {path}: HTTP {error.code}: {error.read()[:500]!r}") from error

    def _get(self, path: str, auth: bool = True) -> Any:
        return self._request("GET", path, auth=auth)

    def run_pipeline(self, timeout: float = 420) -> str:
        """Unpause the DAG (its latest nightly interval is then scheduled) and wait for that run to end."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._get(f"/api/v2/dags/{self.dag_id}")
                break
            except DemoError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        self._request("PATCH", f"/api/v2/dags/{self.dag_id}", {"is_paused": False})
        unpaused_at = time.monotonic()
        run_id = None
        while run_id is None:
            runs = self._get(f"/api/v2/dags/{self.dag_id}/dagRuns?limit=1&order_by=-run_after")["dag_runs"]
            if runs:
                run_id = runs[0]["dag_run_id"]
            elif time.monotonic() > unpaused_at + 60:  # the scheduler made no run: trigger one
                run_id = self._request("POST", f"/api/v2/dags/{self.dag_id}/dagRuns", {"logical_date": None})[
                    "dag_run_id"
                ]
            else:
                time.sleep(2)
        while time.monotonic() < deadline:
            state = self._get(f"/api/v2/dags/{self.dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                if state == "failed":
                    raise DemoError(f"DAG run {run_id} failed; see the task logs in the UI")
                return str(run_id)
            time.sleep(3)
        raise DemoError(f"DAG run {run_id} did not finish within {timeout:.0f}s")

    def task_record(self, run_id: str, task_id: str) -> dict[str, Any]:
        path = f"/api/v2/dags/{self.dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        value = self._get(path)["value"]
        return value if isinstance(value, dict) else json.loads(value)

    def task_links(self, run_id: str, task_id: str) -> dict[str, str]:
        return dict(
            self._get(f"/api/v2/dags/{self.dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links")["extra_links"]
        )

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


def results_table(records: dict[str, dict[str, Any]]) -> str:
    from airflow_sm_prefs.progress import format_seconds

    header = f"{'task':<14} {'configuration':<24} {'preference':<16} {'pending':>9} {'run':>9}"
    lines = [header, "-" * len(header)]
    for task_id, record in records.items():
        config = f"{record['selected_instance_count']} x {record['selected_instance_type']}"
        rank = record["selected_rank"]
        preference = f"#{rank + 1} of {len(record['preferences'])}" + (" fallback" if record["fell_back"] else "")
        lines.append(
            f"{task_id:<14} {config:<24} {preference:<16} {format_seconds(record['pending_seconds']):>9} "
            f"{format_seconds(record['run_seconds'] or 0):>9}"
        )
    return "\n".join(lines)


def main(project_dir: Path, exit_when_done: bool) -> int:
    stack = DemoStack(project_dir=project_dir, workdir=project_dir / ".demo")
    print(f"Starting the SageMaker emulator ({stack.scenario}) and Airflow on 127.0.0.1 ...", flush=True)
    try:
        stack.start()
        print(f"Airflow is up at {stack.api_url}; running the nightly_evaluation pipeline ...", flush=True)
        run_id = stack.run_pipeline()
        records = {task_id: stack.task_record(run_id, task_id) for task_id in SAGEMAKER_TASKS}
        print()
        print(results_table(records))
        print()
        print("Times are the emulator's virtual seconds (the gpu-shortage scenario runs 60x faster than real time).")
        print(f"UI: {stack.api_url}/dags/{stack.dag_id}/runs/{run_id}")
        print(f"Log in as admin with the password generated for this run: {stack.admin_password()}")
        if exit_when_done:
            return 0
        print("Explore the UI; press Ctrl-C to stop.", flush=True)
        while all(process.poll() is None for process in stack.processes):
            time.sleep(1)
        return 1
    except KeyboardInterrupt:
        return 0
    except DemoError as error:
        print(f"demo failed: {error}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
