"""A real Airflow for the fault campaign: each component its own process, so one can be killed alone.

Built on the demo's stack (same loopback binding, generated admin password, emulator with a state file);
adds the REST calls a user would make (trigger, mark failed, clear) and the faults the campaign injects.
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
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from airflow_sm_prefs.demo import DemoError, DemoStack
from tests.faults.invalid import CASES, static_dag_file, static_dag_id
from tests.helpers import control

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
PROJECT_DIR = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def write_scenario(name: str, text: str) -> Path:
    """A scenario file for a stack built on this one (the benchmarks), kept beside its artifacts."""
    path = PROJECT_DIR / "artifacts" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def wait_for(check: Callable[[], T], timeout: float, what: str, every: float = 1.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class CampaignStack(DemoStack):
    components: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    emulator: subprocess.Popen[bytes] | None = None
    scenario_file: Path = Path(__file__).parent / "campaign.yaml"
    secret_key: str = field(default_factory=lambda: "campaign-secret-" + secrets.token_hex(12))
    jwt_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def dags_folder(self) -> Path:
        return self.workdir / "dags"

    def airflow_env(self) -> dict[str, str]:
        env = super().airflow_env()
        env.update(
            {
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__PARALLELISM": "4",
                # The scheduler and the API server must sign and check task tokens with the same key.
                "AIRFLOW__API_AUTH__JWT_SECRET": self.jwt_secret,
                # A killed triggerer's triggers move to a live one after this many seconds (default 30).
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
                "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
                "PYTHONPATH": str(PROJECT_DIR),
            }
        )
        connection = json.loads(env["AIRFLOW_CONN_AWS_DEFAULT"])
        # What an account that gets throttled should configure (README, "Throttling"): botocore's standard
        # retry mode with more attempts than the legacy default of five.
        connection["extra"]["config_kwargs"] = {"retries": {"mode": "standard", "max_attempts": 10}}
        env["AIRFLOW_CONN_AWS_DEFAULT"] = json.dumps(connection)
        return env

    def write_dags(self) -> None:
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        source = Path(__file__).parent / "dags" / "fault_campaign.py"
        (self.dags_folder / source.name).write_text(source.read_text())
        for kind, cases in CASES.items():
            for case in cases:
                (self.dags_folder / f"{static_dag_id(kind, case)}.py").write_text(static_dag_file(kind, case))

    def start(self) -> None:
        self.scenario = str(self.scenario_file)
        if self.workdir.exists():
            shutil.rmtree(self.workdir)  # logs of an earlier campaign would confuse this one's audit
        self.workdir.mkdir(parents=True)
        self.write_dags()
        super().start()

    def start_emulator(self) -> subprocess.Popen[bytes]:
        self.emulator = super().start_emulator()
        wait_for(self._emulator_answers, 30, "the emulator to answer")
        return self.emulator

    def _emulator_answers(self) -> bool:
        try:
            return bool(control(self.emulator_url, "health")["ok"])
        except OSError:
            return False

    def start_airflow(self) -> None:
        env = self.airflow_env()
        migrate = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, timeout=300
        )
        if migrate.returncode != 0:
            raise DemoError(f"airflow db migrate failed: {migrate.stderr.decode()[-2000:]}")
        for component in COMPONENTS:
            self.start_component(component)

    def start_component(self, component: str) -> None:
        self.components[component] = self._spawn(
            [sys.executable, "-m", "airflow", component], f"{component}.log", self.airflow_env()
        )

    # -- faults -------------------------------------------------------------------------------------------

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def kill_component(self, component: str) -> None:
        """SIGKILL to the component and every process it started, as an OOM kill or a lost node would."""
        self._kill(self.components.pop(component))

    def kill_emulator(self) -> None:
        assert self.emulator is not None
        self._kill(self.emulator)
        self.emulator = None

    def kill_task_process(self, ti_id: str) -> int:
        """SIGKILL the process running a task instance's code (the Task SDK titles it with the TI's id)."""
        title = f"airflow worker -- {ti_id}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == title:
                    os.kill(int(entry.name), signal.SIGKILL)
                    return int(entry.name)
        raise DemoError(f"no process runs task instance {ti_id}")

    # -- the emulator's side ------------------------------------------------------------------------------

    def jobs(self) -> list[dict[str, Any]]:
        return list(control(self.emulator_url, "jobs")["jobs"])

    def calls(self) -> dict[str, int]:
        return dict(control(self.emulator_url, "calls")["calls"])

    def set_capacity(self, capacity: dict[str, int]) -> None:
        control(self.emulator_url, "capacity", capacity)

    def set_faults(self, **faults: Any) -> None:
        control(self.emulator_url, "faults", faults)

    # -- what a user does through the REST API ------------------------------------------------------------

    def trigger(self, dag_id: str) -> str:
        wait_for(lambda: self._dag_known(dag_id), 120, f"DAG {dag_id} to be parsed")
        run = self._request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None})
        return str(run["dag_run_id"])

    def _dag_known(self, dag_id: str) -> bool:
        try:
            self._get(f"/api/v2/dags/{dag_id}")
            return True
        except DemoError:
            return False

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        run = urllib.parse.quote(run_id, safe="")
        return list(self._get(f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances?limit=200")["task_instances"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self._get(f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}")["state"])

    def wait_run_done(self, dag_id: str, run_id: str, timeout: float = 240) -> str:
        return wait_for(
            lambda: (state := self.run_state(dag_id, run_id)) in ("success", "failed") and state,
            timeout,
            f"run {run_id} of {dag_id} to end",
            every=2,
        )

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1) -> Any:
        run = urllib.parse.quote(run_id, safe="")
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}/xcomEntries/{key}?map_index={map_index}"
        try:
            value = self._get(path)["value"]
        except DemoError as error:
            if "HTTP 404" in str(error):
                return None
            raise
        return json.loads(value) if isinstance(value, str) else value

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> None:
        run = urllib.parse.quote(run_id, safe="")
        self._request("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances/{task_id}", {"new_state": state})

    def clear_task(self, dag_id: str, run_id: str, task_id: str) -> None:
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False}
        self._request("POST", f"/api/v2/dags/{dag_id}/clearTaskInstances", body)

    def set_run_state(self, dag_id: str, run_id: str, state: str) -> None:
        self._request("PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}", {"state": state})

    def import_errors(self) -> dict[str, str]:
        errors = self._get("/api/v2/importErrors?limit=500")["import_errors"]
        return {Path(e["filename"]).stem: str(e["stack_trace"]) for e in errors}

    def task_logs(self, dag_id: str, run_id: str, task_id: str) -> list[str]:
        """The log of every try of an unmapped task instance, first try first."""
        (ti,) = [t for t in self.task_instances(dag_id, run_id) if t["task_id"] == task_id]
        return [self.task_log(dag_id, run_id, task_id, n) for n in range(1, ti["try_number"] + 1)]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        folder = self.airflow_home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        if map_index >= 0:
            folder = folder / f"map_index={map_index}"
        path = folder / f"attempt={try_number}.log"
        return path.read_text() if path.exists() else ""
