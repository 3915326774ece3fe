"""After each scenario: what the emulator's own job list says, set against what Airflow says.

A duplicate is a job beyond the generations the scenario asked for (one per task instance, plus one per
deliberate re-run such as a user's clear). An orphan is a job still queued or running whose task instance is
not. Jobs are tied to task instances by the tags the operator puts on every job, not by Airflow's records.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_sm_prefs.sagemaker import tagging
from tests.faults.stack import CampaignStack

LIVE_TASK_STATES = {"running", "deferred", "queued", "scheduled", "up_for_retry", "restarting", "up_for_reschedule"}


@dataclass
class Expect:
    """One DAG run: the final state of each task (``task`` or ``task[map_index]``) and job generations."""

    dag_id: str
    run_id: str
    states: dict[str, str]
    generations: dict[str, int] = field(default_factory=dict)


@dataclass
class Row:
    scenario: str
    faults: str
    jobs: int = 0
    duplicates: int = 0
    orphans: int = 0
    tasks_ok: int = 0
    tasks: int = 0
    recorded: int = 0
    to_record: int = 0
    problems: list[str] = field(default_factory=list)


def task_key(task_id: str, map_index: int) -> str:
    return f"{task_id}[{map_index}]" if map_index >= 0 else task_id


def jobs_of(stack: CampaignStack, dag_id: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The run's jobs by task instance, oldest first."""
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in stack.jobs():
        tags = job["tags"]
        if tags.get(tagging.DAG_ID) == dag_id and tags.get(tagging.RUN_ID) == tagging.tag_value(run_id):
            by_task[task_key(tags[tagging.TASK_ID], int(tags[tagging.MAP_INDEX]))].append(job)
    return by_task


def _settled(stack: CampaignStack, expects: list[Expect]) -> None:
    # A stop takes the service a few (virtual) seconds; judge jobs once no stop is in flight.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        statuses = [j["status"] for e in expects for js in jobs_of(stack, e.dag_id, e.run_id).values() for j in js]
        if "Stopping" not in statuses:
            return
        time.sleep(0.5)


def audit(stack: CampaignStack, scenario: str, faults: str, *expects: Expect) -> Row:
    row = Row(scenario, faults)
    _settled(stack, list(expects))
    for expect in expects:
        by_task = jobs_of(stack, expect.dag_id, expect.run_id)
        instances = {
            task_key(ti["task_id"], ti["map_index"]): ti for ti in stack.task_instances(expect.dag_id, expect.run_id)
        }
        for key in sorted(set(by_task) - set(instances)):
            row.problems.append(f"{expect.dag_id}/{key}: {len(by_task[key])} job(s) tagged for an unknown task")
        for key, wanted in expect.states.items():
            ti = instances.get(key)
            state = ti["state"] if ti else "missing"
            row.tasks += 1
            if state == wanted:
                row.tasks_ok += 1
            else:
                row.problems.append(f"{expect.dag_id}/{key}: task is {state}, expected {wanted}")
            jobs = by_task.get(key, [])
            row.jobs += len(jobs)
            extra = len(jobs) - expect.generations.get(key, 1)
            if extra > 0:
                row.duplicates += extra
                row.problems.append(f"{expect.dag_id}/{key}: {len(jobs)} jobs: {[j['name'] for j in jobs]}")
            for job in jobs:
                if job["status"] == "InProgress" and state not in LIVE_TASK_STATES:
                    row.orphans += 1
                    row.problems.append(f"{expect.dag_id}/{key}: job {job['name']} still InProgress, task {state}")
            if jobs and jobs[-1]["selected"] and ti is not None:
                row.to_record += 1
                problem = _record_problem(stack, expect, ti, jobs[-1])
                if problem:
                    row.problems.append(f"{expect.dag_id}/{key}: {problem}")
                else:
                    row.recorded += 1
    return row


def _record_problem(stack: CampaignStack, expect: Expect, ti: dict[str, Any], job: dict[str, Any]) -> str | None:
    """The configuration SageMaker chose must be in XCom: in the result (the returned record, or the
    ``record`` of a task that failed on the job's outcome), else, for a task a user ended by hand, in the
    ``selection`` pushed when SageMaker chose."""
    chosen = job["selected"]["instance_type"]
    keys = {
        "success": ["selection", "return_value"],  # a success has both: the early announcement and the result
        "failed": ["record"] if job["status"] == "Failed" else ["selection"],
    }.get(ti["state"], ["selection"])
    for key in keys:
        value = stack.xcom(expect.dag_id, expect.run_id, ti["task_id"], key, ti["map_index"])
        if not value or value.get("selected_instance_type") != chosen:
            return f"{key} XCom {value!r} does not name {chosen}"
    return None


def table(rows: list[Row]) -> str:
    lines = [
        "| scenario | faults injected | jobs launched | duplicates | orphans | tasks in expected state "
        "| choice recorded |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        recorded = f"{row.recorded}/{row.to_record}" if row.to_record else "n/a"
        lines.append(
            f"| {row.scenario} | {row.faults} | {row.jobs} | {row.duplicates} | {row.orphans} "
            f"| {row.tasks_ok}/{row.tasks} | {recorded} |"
        )
    problems = [f"- {row.scenario}: {problem}" for row in rows for problem in row.problems]
    return "\n".join(lines + (["", "Problems found:", *problems] if problems else [])) + "\n"


def airflow_races(scheduler_log: Path) -> int:
    """Tries Airflow failed itself when a deferral's executor event arrived after the trigger's event."""
    if not scheduler_log.exists():
        return 0
    return scheduler_log.read_text(errors="replace").count("finished with state success, but the task instance's state")
