"""The production topology of docker-compose.yaml, on this machine without Docker: PostgreSQL as the metadata
database, Redis as the Celery broker, the API server, scheduler and DAG processor, two Celery workers and two
triggerers, plus the emulator; every one on 127.0.0.1.

It is the fault campaign's stack (tests/faults) with those parts swapped in, so the campaign's scenarios run
on it unchanged. Two triggerers and two workers on one host do not serve logs (their ports would clash);
the API server reads the task logs from the shared log folder, as with one host.

Also runnable by hand (`make stack`): python -m tests.production.stack
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_sm_prefs.local_stack import LocalStack
from tests.faults.stack import CampaignStack
from tests.production.services import Services

HEARTBEAT_TIMEOUT = 45


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

    def airflow_env(self) -> dict[str, str]:
        env: dict[str, str] = super().airflow_env()  # type: ignore[misc]
        env.update(self.services.airflow_env())
        # A lost worker's task is failed (and retried) once its heartbeat is this old: 5 minutes by default,
        # shortened so the campaign's lost-worker scenario fits a test run.
        env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] = str(HEARTBEAT_TIMEOUT)
        return env

    def start(self) -> None:
        # Start with ``with stack:``: a start that fails half-way then stops the services too.
        self.services.start()
        super().start()  # type: ignore[misc]

    def stop(self) -> None:
        try:
            super().stop()  # type: ignore[misc]
        finally:
            self.services.stop()


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
