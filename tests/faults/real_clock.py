"""The deferral race's campaign at a real-time clock (issue 49), shared by both topologies.

Airflow 3.1 to 3.3 fail a deferred task whose trigger event re-queues it before the scheduler has taken the
deferring try's exit (apache/airflow#67287). At the emulator's usual 60x clock a job's news comes seconds after
the deferral in every scenario; here the clock is real, and each job is selected 0 to 10 s after its create and
ends a few seconds later (tests/faults/real_clock.yaml): the harshest case for the race. Two DAG runs of
``SHARDS`` mapped tasks (retries 0 and 1, ``check_interval=5``) run at once, with a CPU hog beside the stack, and the
package keeps its default ``[sm_prefs] deferral_hold_seconds`` (90 s).

The audit: every task succeeded on its first try (none failed by the race), no job was stopped (no healthy job
stopped), one job per task instance, each recorded in XCom and once in the ledger. And the windows the hold is
about, measured per task instance from the logs: deferral to the scheduler taking the deferring try's exit
(the scheduler log's first executor event for the try), and deferral to the trigger's event.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from airflow_sm_prefs.evidence import ledger_reading
from tests.faults.audit import Expect, Row, airflow_races, audit, jobs_of, task_key
from tests.faults.stack import CampaignStack

HERE = Path(__file__).parent
DAG_IDS = ("real_clock_retries_0", "real_clock_retries_1")
# Mapped tasks per DAG (two DAGs): 10 in `make test` (20 task instances a topology: every one a trial of the
# race, and its windows measured; `make test` runs it beside the rest of the suite, which keeps 2 cores busy
# besides its own hog), 50 in `make faults` and `make production-faults` (100, as issue 49 measured, whose
# figures docs/reliability.md shows).
SHARDS = int(os.environ.get("SM_PREFS_REAL_CLOCK_SHARDS", "10"))
SCENARIO = "10. Airflow's deferral race at a real-time clock"
FAULTS = (
    "each job selected 0-10 s after its create and ending 4-15 s after it; check_interval=5; retries 0 and 1; "
    f"{2 * SHARDS} task instances at once; a CPU hog beside the stack"
)
DEFERRING = "Deferring: the job's end resumes the task"
RESUMING = "Resuming the task ("
REPORT = re.compile(
    r"^(\S+) \[info\s*\] Received executor event with state success for task instance TaskInstanceKey\("
    r"dag_id='([^']+)', task_id='([^']+)', run_id='([^']+)', try_number=(\d+), map_index=(-?\d+)\)",
    re.MULTILINE,
)


@dataclass
class RealClockStack(CampaignStack):
    """The campaign's stack on the real-clock scenario, with only this campaign's DAGs and the package's own
    default hold (a stack on a real clock keeps it, as a deployment would)."""

    scenario: str = str(HERE / "real_clock.yaml")
    deferral_hold_seconds: float | None = None
    parallelism: int = 4

    def write_dags(self) -> None:
        assert self.dags_folder is not None
        self.dags_folder.mkdir(parents=True, exist_ok=True)
        source = HERE / "dags_real_clock" / "real_clock.py"
        text = source.read_text()
        assert "\nSHARDS = 50\n" in text
        (self.dags_folder / source.name).write_text(text.replace("\nSHARDS = 50\n", f"\nSHARDS = {SHARDS}\n"))


@contextlib.contextmanager
def cpu_hog(seconds: float) -> Iterator[None]:
    """One busy process at normal priority beside the stack; it ends itself after ``seconds`` at the latest."""
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"]
    )
    try:
        yield
    finally:
        hog.kill()
        hog.wait(timeout=30)


@dataclass
class Windows:
    """Seconds from each deferral to the scheduler taking its exit, and to its trigger's event."""

    report: list[float] = field(default_factory=list)
    event: list[float] = field(default_factory=list)
    margin: list[float] = field(default_factory=list)  # event minus report, per task instance: > 0 is safe
    unmeasured: int = 0

    def note(self, topology: str, hold: str) -> str:
        if not self.report or not self.event:
            return f"Deferral race, {topology}: the windows could not be measured ({self.unmeasured} unmeasured)."
        return (
            f"Deferral race at a real-time clock, {topology}, hold {hold}: from a task's deferral to the scheduler "
            f"taking its exit, median {statistics.median(self.report):.1f} s, longest {max(self.report):.1f} s; to "
            f"the trigger's event, shortest {min(self.event):.1f} s, median {statistics.median(self.event):.1f} s; the "
            f"event came after the exit was taken by at least {min(self.margin):.1f} s "
            f"({len(self.margin)} task instances measured, {self.unmeasured} not)."
        )


def _when(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _first_of(stack: CampaignStack, dag_id: str, run_id: str, map_index: int, message: str) -> dt.datetime | None:
    """When the first try's first line starting with ``message`` was logged (worker and trigger logs)."""
    for path in stack._try_files(dag_id, run_id, "train", 1, map_index, ".log*"):
        for line in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                entry = json.loads(line)
                if str(entry["event"]).startswith(message):
                    return _when(entry["timestamp"])
    return None


def measure(stack: CampaignStack, runs: dict[str, str], scheduler_log: Path) -> Windows:
    reports: dict[tuple[str, str, int], dt.datetime] = {}
    text = scheduler_log.read_text(errors="replace") if scheduler_log.exists() else ""
    for stamp, dag_id, _task_id, run_id, try_number, map_index in REPORT.findall(text):
        if try_number == "1":
            reports.setdefault((dag_id, run_id, int(map_index)), _when(stamp))  # the first: the deferral's exit
    windows = Windows()
    for dag_id, run_id in runs.items():
        for map_index in range(SHARDS):
            deferred = _first_of(stack, dag_id, run_id, map_index, DEFERRING)
            resumed = _first_of(stack, dag_id, run_id, map_index, RESUMING)
            report = reports.get((dag_id, run_id, map_index))
            if deferred is None or resumed is None or report is None:
                windows.unmeasured += 1
                continue
            windows.report.append((report - deferred).total_seconds())
            windows.event.append((resumed - deferred).total_seconds())
            windows.margin.append((resumed - report).total_seconds())
    return windows


def run(stack: CampaignStack, scheduler_log: Path, timeout: float = 900) -> tuple[Row, Windows]:
    """Both DAG runs at once beside a CPU hog, then the audit."""
    with cpu_hog(timeout):
        runs = {dag_id: stack.trigger(dag_id) for dag_id in DAG_IDS}
        for dag_id, run_id in runs.items():
            stack.wait_run_done(dag_id, run_id, timeout=timeout)
    expects = [Expect(d, r, {task_key("train", i): "success" for i in range(SHARDS)}) for d, r in runs.items()]
    row = audit(stack, SCENARIO, FAULTS, *expects)
    races = airflow_races(scheduler_log)
    if races:
        row.problems.append(f"Airflow failed {races} tries with the deferral race")
    for dag_id, run_id in runs.items():
        retried = [ti["map_index"] for ti in stack.task_instances(dag_id, run_id) if ti["try_number"] != 1]
        if retried:
            row.problems.append(f"{dag_id}: map indexes {retried} needed more than one try")
        for key, jobs in jobs_of(stack, dag_id, run_id).items():
            stopped = [job["name"] for job in jobs if job["status"] == "Stopped"]
            if stopped:
                row.problems.append(f"{dag_id}/{key}: healthy job(s) stopped: {stopped}")
    row.problems.extend(_ledger_problems(stack, runs))
    return row, measure(stack, runs, scheduler_log)


def campaign(stack: CampaignStack, topology: str, rows: list[Row], notes: list[str]) -> None:
    """A test module's whole campaign on ``stack``: run, audit, measure, and put its row and note in the report."""
    with stack:
        row, windows = run(stack, stack.workdir / "scheduler.log")
    notes.append(windows.note(topology, "90 s (the default)"))
    rows.append(row)
    assert not row.problems, "\n".join(row.problems)
    assert (row.tasks_ok, row.jobs, row.recorded) == (2 * SHARDS, 2 * SHARDS, 2 * SHARDS)


def _ledger_problems(stack: CampaignStack, runs: dict[str, str]) -> list[str]:
    """Every job of the runs has exactly one ledger entry (the ledger keeps one object per job)."""
    deadline = time.monotonic() + 60
    while True:
        entries = ledger_reading.read(stack.ledger_root).entries
        per_job: dict[str, int] = {}
        for entry in entries:
            if runs.get(entry["dag_id"]) == entry["run_id"]:
                per_job[entry["job_name"]] = per_job.get(entry["job_name"], 0) + 1
        jobs = {job["name"] for d, r in runs.items() for js in jobs_of(stack, d, r).values() for job in js}
        missing = sorted(jobs - set(per_job))
        twice = sorted(name for name, count in per_job.items() if count > 1)
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(2)
    problems = [f"{len(missing)} jobs have no ledger entry: {missing[:5]}"] if missing else []
    if twice:
        problems.append(f"{len(twice)} jobs have more than one ledger entry: {twice[:5]}")
    return problems
