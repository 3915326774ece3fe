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
DEMO_BUCKET = "sm-prefs-demo"
# Days of raw data that land before the run: the nightly run reads its interval's day (``raw/{{ ds }}``),
# which is yesterday or today depending on the hour, and a triggered run reads today's.
LANDED_DAYS = 3


def land_raw_data(stack: LocalStack) -> list[str]:
    """Upload the raw data the nightly pipeline reads to the emulator's S3, as an upstream producer would."""
    import pendulum

    s3 = stack.aws_client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)
    today = pendulum.today("UTC")
    uris = []
    for days_ago in range(LANDED_DAYS):
        key = f"raw/{today.subtract(days=days_ago).to_date_string()}/events.jsonl"
        s3.put_object(Bucket=DEMO_BUCKET, Key=key, Body=b'{"prompt": "2 + 2 =", "expected": "4"}\n')
        uris.append(f"s3://{DEMO_BUCKET}/{key}")
    return uris


def run_pipeline(stack: LocalStack, timeout: float = 420) -> str:
    """Land the raw data, unpause the DAG (its latest nightly interval is then scheduled), wait for the run."""
    dag_id = stack.dag_id
    land_raw_data(stack)
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


def capacity_report(stack: LocalStack) -> str:
    """What `airflow-sm-prefs report` prints for this stack's ledger."""
    from airflow_sm_prefs import ledger, report

    return report.render(report.summarize(ledger.read(stack.ledger_root).entries), "table")


def main(project_dir: Path, exit_when_done: bool) -> int:
    stack = LocalStack(project_dir=project_dir, workdir=project_dir / ".demo")
    print(f"Starting the SageMaker emulator ({stack.scenario}) and Airflow on 127.0.0.1 ...", flush=True)
    try:
        stack.start()
        print(f"Airflow is up at {stack.api_url}; running the nightly_evaluation pipeline ...", flush=True)
        run_id = run_pipeline(stack)
        records = {task_id: stack.xcom(stack.dag_id, run_id, task_id) for task_id in SAGEMAKER_TASKS}
        model = stack.xcom(stack.dag_id, run_id, "inspect_model")
        print()
        print(results_table(records))
        print()
        files = ", ".join(model["files"])
        print(f"Model written by fine_tune: {model['model_artifact']} ({model['bytes']} bytes: {files})")
        print()
        print(capacity_report(stack))
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
