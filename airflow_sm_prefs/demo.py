"""`make demo`: the emulator plus a real Airflow (`airflow standalone`), the nightly pipeline, a results table.

Everything binds to 127.0.0.1; the admin password is the one Airflow generates for this run (never a fixed
one). The end-to-end test drives the same stack, headless.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from airflow_sm_prefs.local_stack import LocalStack, StackError

SAGEMAKER_TASKS = ("prepare_data", "fine_tune")


def run_pipeline(stack: LocalStack, timeout: float = 420) -> str:
    """Unpause the DAG (its latest nightly interval is then scheduled) and wait for that run to end."""
    dag_id = stack.dag_id
    deadline = time.monotonic() + timeout
    while not stack.dag_known(dag_id):
        if time.monotonic() > deadline:
            raise StackError(f"DAG {dag_id} was not parsed within {timeout:.0f}s")
        time.sleep(2)
    stack.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    unpaused_at = time.monotonic()
    run_id = None
    while run_id is None:
        runs = stack.get(f"/api/v2/dags/{dag_id}/dagRuns?limit=1&order_by=-run_after")["dag_runs"]
        if runs:
            run_id = runs[0]["dag_run_id"]
        elif time.monotonic() > unpaused_at + 60:  # the scheduler made no run: trigger one
            run_id = stack.trigger(dag_id)
        else:
            time.sleep(2)
    state = stack.wait_run_done(dag_id, run_id, timeout=max(1.0, deadline - time.monotonic()))
    if state == "failed":
        raise StackError(f"DAG run {run_id} failed; see the task logs in the UI")
    return str(run_id)


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
    stack = LocalStack(project_dir=project_dir, workdir=project_dir / ".demo")
    print(f"Starting the SageMaker emulator ({stack.scenario}) and Airflow on 127.0.0.1 ...", flush=True)
    try:
        stack.start()
        print(f"Airflow is up at {stack.api_url}; running the nightly_evaluation pipeline ...", flush=True)
        run_id = run_pipeline(stack)
        records = {task_id: stack.xcom(stack.dag_id, run_id, task_id) for task_id in SAGEMAKER_TASKS}
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
    except (StackError, TimeoutError) as error:
        print(f"demo failed: {error}", file=sys.stderr)
        return 1
    finally:
        stack.stop()
