"""The fault campaign's Airflow: the local stack with one process per component, plus the faults it injects.

Test-only: it writes the campaign's DAGs, kills components, the emulator and task processes.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sm_prefs_devkit.local_stack import LocalStack, StackError
from tests.faults.invalid import CASES, STATIC_GUARDRAIL_CASES, STATIC_WAYS, static_dag_file, static_dag_id

PROJECT_DIR = Path(__file__).resolve().parents[2]
# `make test` runs the platforms' environments (.venv-mwaa-<version>) beside the main one (.venv) in one
# checkout: each environment keeps its campaigns' stacks, logs and report in a folder of its own, so neither
# deletes the other's stack when it prepares its own.
ARTIFACTS_DIR = PROJECT_DIR / "artifacts" / Path(sys.prefix).name.removeprefix(".venv").lstrip("-")
EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Exit)\b.*$", re.MULTILINE)


@dataclass(frozen=True)
class Crash:
    """A component that exited on its own, or hung (``exit_code`` None: the liveness check killed it), and the
    last exception its log names."""

    component: str
    exit_code: int | None
    reason: str


def last_exception(log: Path) -> str:
    found = EXCEPTION_LINE.findall(log.read_text(errors="replace")) if log.exists() else []
    return found[-1].strip() if found else "no exception in its log"


@dataclass
class CampaignStack(LocalStack):
    separate_components: bool = True
    parallelism: int = 4
    scenario: str = str(Path(__file__).parent / "campaign.yaml")
    secret_key: str = field(default_factory=lambda: "campaign-secret-" + secrets.token_hex(12))
    # What an account that gets throttled should configure (docs/real-aws.md, "Throttling"): botocore's standard
    # retry mode with more attempts than the legacy default of five.
    aws_config_kwargs: dict[str, object] | None = field(
        default_factory=lambda: {"retries": {"mode": "standard", "max_attempts": 10}}
    )
    # Components that exited without the campaign killing them, restarted as every platform restarts them
    # (systemd's Restart=, a Kubernetes pod, MWAA): Airflow's own scheduler crashes on some races (a task
    # cleared while the scheduler handles its deferral's executor event: StaleDataError on Airflow 3.1), and
    # what the campaign checks is that the jobs survive such a restart, not that Airflow never needs one.
    crashes: list[Crash] = field(default_factory=list)
    # A scheduler that stops heartbeating without exiting is restarted too, as a platform's liveness probe does
    # (the official Helm chart's `airflow jobs check --job-type SchedulerJob`): Airflow 3.1.6's scheduler, after
    # that StaleDataError, can hang in "Shutting down LocalExecutor" for good. Seconds the API's health
    # endpoint must call a scheduler that was healthy unhealthy (its heartbeat older than
    # scheduler_health_check_threshold, 30 s) before it is killed and started again.
    liveness_grace: float = 30.0
    liveness_period: float = 5.0  # seconds between two looks at the scheduler's health
    _next_liveness_check: float = field(default=0.0, repr=False)
    _unhealthy_since: float | None = field(default=None, repr=False)
    _seen_healthy: bool = field(default=False, repr=False)
    _supervision: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _supervisor: threading.Thread | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.dags_folder = self.workdir / "dags"
        self.extra_env = {
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            # A killed triggerer's triggers move to a live one after this many seconds (default 30).
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
            # The campaign's DAG files import the shared test cases from tests/.
            "PYTHONPATH": str(PROJECT_DIR),
            **self.extra_env,
        }

    def write_dags(self) -> None:
        assert self.dags_folder is not None
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        source = Path(__file__).parent / "dags" / "fault_campaign.py"
        (self.dags_folder / source.name).write_text(source.read_text())

    def write_refused_dags(self) -> dict[str, tuple[str, str]]:
        """The refused DAG files, one a static case of tests/faults/invalid.py (84), written by the one test that
        reads their import errors: Airflow parses each again every 30 s, which kept an idle stack's DAG processor
        at 52 % of a core (2 % without them) for the whole campaign when they were written before the start.
        Returns each file's DAG id with the case it states and the words its import error must hold."""
        assert self.dags_folder is not None
        refused: dict[str, tuple[str, str, str]] = {}  # DAG id: (the file, the case, the words)
        for kind, cases in CASES.items():
            for case, (_, expected) in cases.items():
                for way in STATIC_WAYS:
                    refused[static_dag_id(kind, case, way)] = (
                        static_dag_file(kind, case, way),
                        f"static {kind} {case}",
                        expected,
                    )
        for case, (kind, _, expected) in STATIC_GUARDRAIL_CASES.items():
            refused[static_dag_id(kind, case, "guardrail")] = (
                static_dag_file(kind, case, "guardrail"),
                f"static guardrail {case}",
                expected,
            )
        for dag_id, (text, _, _) in refused.items():
            # Whole or not at all: the running DAG processor lists *.py files, and one it parsed half written
            # would wait out the 30 s for its next parse.
            partial = self.dags_folder / f".{dag_id}.partial"
            partial.write_text(text)
            partial.replace(self.dags_folder / f"{dag_id}.py")
        return {dag_id: (case, expected) for dag_id, (_, case, expected) in refused.items()}

    def prepare(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)  # logs of an earlier campaign would confuse this one's audit
        self.workdir.mkdir(parents=True)
        self.write_dags()

    def start(self) -> None:
        super().start()
        self.start_restart_policy()

    def start_restart_policy(self) -> None:
        self._stopping.clear()
        self._supervisor = threading.Thread(target=self._restart_crashed, name="restart-policy", daemon=True)
        self._supervisor.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=30)
            self._supervisor = None
        super().stop()

    def _restart_crashed(self) -> None:
        while not self._stopping.wait(1.0):
            with self._supervision:
                for component, process in list(self.components.items()):
                    if process.poll() is None:
                        continue
                    reason = last_exception(self.workdir / f"{component}.log")
                    self.crashes.append(Crash(component, process.returncode, reason))
                    self.processes.remove(process)
                    self.start_component(component)
            if self._scheduler_hung():
                with self._supervision:
                    if "scheduler" in self.components:  # unless a scenario killed it meanwhile
                        hung = self.components["scheduler"]
                        self._kill(hung)
                        self.crashes.append(Crash("scheduler", None, last_exception(self.workdir / "scheduler.log")))
                        self.processes.remove(hung)
                        self.start_component("scheduler")

    def scheduler_health(self) -> str | None:
        """What the API's health endpoint says of the scheduler; None when the API server does not answer."""
        try:
            health = self.get("/api/v2/monitor/health", auth=False)
        except (OSError, StackError):
            return None
        return str(health.get("scheduler", {}).get("status"))

    def _scheduler_hung(self) -> bool:
        """The liveness check: a scheduler seen healthy since it started, and unhealthy for ``liveness_grace``
        seconds since. One the campaign killed, or one not yet healthy, is left alone."""
        if "scheduler" not in self.components:
            self._seen_healthy, self._unhealthy_since = False, None
            return False
        now = time.monotonic()
        if now < self._next_liveness_check:
            return False
        self._next_liveness_check = now + self.liveness_period
        status = self.scheduler_health()
        if status is None:  # the API server is down: that is another fault, not the scheduler's
            return False
        if status == "healthy":
            self._seen_healthy, self._unhealthy_since = True, None
            return False
        if not self._seen_healthy:
            return False
        self._unhealthy_since = self._unhealthy_since or now
        if now - self._unhealthy_since < self.liveness_grace:
            return False
        self._seen_healthy, self._unhealthy_since = False, None  # the new one must become healthy first
        return True

    def crash_notes(self) -> list[str]:
        """The report's words for the components the restart policy restarted."""
        return [
            f"Airflow's {crash.component} exited on its own (code {crash.exit_code}: {crash.reason}) and was "
            "restarted, as the platform's restart policy would."
            if crash.exit_code is not None
            else f"Airflow's {crash.component} stopped heartbeating without exiting (its last exception: "
            f"{crash.reason}) and was killed and restarted after {self.liveness_grace:.0f} s unhealthy, as a "
            "platform's liveness probe would."
            for crash in self.crashes
        ]

    # -- faults -------------------------------------------------------------------------------------------

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        # Every descendant, not only the process group: the Task SDK puts each task process in a group of its
        # own, and a lost machine takes those too.
        for pid in [process.pid, *descendants(process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=30)

    def kill_component(self, component: str) -> None:
        """SIGKILL to the component and every process it started, as an OOM kill or a lost node would; it stays
        down until the scenario starts it again."""
        with self._supervision:
            self._kill(self.components.pop(component))

    def pause_component(self, component: str) -> None:
        """SIGSTOP to the component and every process it started: a host that stops answering (a long GC
        pause, a starved VM) without dying, so its heartbeats lapse."""
        process = self.components[component]
        for pid in [process.pid, *descendants(process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume_component(self, component: str) -> None:
        process = self.components[component]
        for pid in [*descendants(process.pid), process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def kill_emulator(self) -> None:
        assert self.emulator is not None
        self._kill(self.emulator)
        self.emulator = None

    def kill_task_process(self, ti_id: str) -> int:
        """SIGKILL the process running a task instance's code."""
        pid = task_process(ti_id)
        os.kill(pid, signal.SIGKILL)
        return pid

    def component_running(self, ti_id: str) -> str:
        """The component (a worker) that started the process running a task instance's code."""
        ancestors = {parent.pid for parent in psutil.Process(task_process(ti_id)).parents()}
        for name, process in self.components.items():
            if process.pid in ancestors:
                return name
        raise StackError(f"task instance {ti_id} runs outside every component")


def descendants(pid: int) -> list[int]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return [child.pid for child in psutil.Process(pid).children(recursive=True)]
    return []


def task_process(ti_id: str) -> int:
    """The process running a task instance's code (the Task SDK titles it with the TI's id)."""
    title = f"airflow worker -- {ti_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == title:
                return int(entry.name)
    raise StackError(f"no process runs task instance {ti_id}")
