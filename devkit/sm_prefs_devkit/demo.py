"""`make demo`: the emulator plus a real Airflow (`airflow standalone`), the nightly pipeline, a results table.

Everything binds to 127.0.0.1; the admin password is the one Airflow generates for this run (never a fixed
one). The end-to-end test drives the same stack, headless.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sm_prefs_devkit.local_stack import LocalStack, StackError, control, wait_for

SAGEMAKER_TASKS = ("prepare_data", "fine_tune", "evaluate")
CERTIFICATION_DAG = "nightly_fine_tune_certification"
# Another team's DAG in the same account that lists the first choice alone: its waits are the report's
# evidence of how long that type stayed sold out on the nights the pipeline fell back.
OTHER_TEAM_DAG = "team_b_pretraining"
DEMO_BUCKET = "sm-prefs-demo"
WEATHER_SCENARIO = "nightly-weather"
NIGHTS = 4
PLAN_NIGHTS = 2  # the nights after the advised plan is bought (the scenario's nights 5 and 6)
# Days of raw data that land before the runs: each reads its logical day's (``raw/{{ ds }}``); the scheduled
# run's is today or yesterday depending on the hour, and later nights run for the days before.
LANDED_DAYS = NIGHTS + PLAN_NIGHTS + 1
# Said first, before any figure: every time the demo prints is the emulator's, not the wall clock's.
VIRTUAL_TIME_NOTE = (
    "Times below are the emulator's virtual time: its scenarios run 60x faster than real time, so a night's "
    "hours pass in minutes."
)
NIGHT_SECONDS = 86400.0  # the weather scenario's nights are a virtual day apart
HOUR_SECONDS = 3600.0


def land_raw_data(stack: LocalStack) -> list[str]:
    """Upload the raw data the nightly pipeline reads to the emulator's S3, as an upstream producer would."""
    import pendulum

    s3 = stack.aws_client("s3")
    s3.create_bucket(Bucket=DEMO_BUCKET)
    today = pendulum.today("UTC")
    uris = []
    keys = [f"raw/{today.subtract(days=n).to_date_string()}/events.jsonl" for n in range(LANDED_DAYS)]
    keys.append("certification/shards/part-0.jsonl")  # the fixed dataset the certification runs on
    for key in keys:
        s3.put_object(Bucket=DEMO_BUCKET, Key=key, Body=b'{"prompt": "2 + 2 =", "expected": "4"}\n')
        uris.append(f"s3://{DEMO_BUCKET}/{key}")
    return uris


def certify(stack: LocalStack, timeout: float = 300) -> dict[str, Any]:
    """Run the fine-tuning step's certification (dags/nightly_certification.py) once, as a team would before
    the first nightly run; what it decided per candidate."""
    land_raw_data(stack)
    stack.trigger(CERTIFICATION_DAG)  # waits until the DAG is parsed
    stack.request("PATCH", f"/api/v2/dags/{CERTIFICATION_DAG}", {"is_paused": False})
    runs = stack.get(f"/api/v2/dags/{CERTIFICATION_DAG}/dagRuns?limit=1&order_by=-run_after")["dag_runs"]
    run_id = runs[0]["dag_run_id"]
    stack.wait_run_done(CERTIFICATION_DAG, run_id, timeout=timeout)
    decided = stack.xcom(CERTIFICATION_DAG, run_id, "record_passing")
    if not isinstance(decided, dict):
        raise StackError(f"the certification run {run_id} decided nothing; see its task logs")
    return decided


def certification_table(decided: dict[str, Any]) -> str:
    lines = [f"{'candidate':<22} verdict", "-" * 60]
    for label, result in decided["candidates"].items():
        lines.append(f"{label:<22} {'certified' if result['passed'] else 'NOT certified'}: {result['reason']}")
    return "\n".join(lines)


def run_pipeline(stack: LocalStack, timeout: float = 420, allow_failure: bool = False) -> str:
    """Unpause the DAG (its latest nightly interval is then scheduled), wait for the run."""
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
    if state == "failed" and not allow_failure:
        raise StackError(f"DAG run {run_id} failed; see the task logs in the UI")
    return str(run_id)


def run_nights(stack: LocalStack, nights: int = NIGHTS, timeout: float = 300) -> list[tuple[str, str]]:
    """The pipeline once a night on the weather scenario: night 1 is the DAG's scheduled run; before each
    later night the emulator's clock moves to that night (a virtual day on), then a run is triggered.
    Returns each night's (run id, state); a night whose run failed is part of the story, not an error."""
    wait_for(lambda: stack.dag_known(OTHER_TEAM_DAG), 120, f"DAG {OTHER_TEAM_DAG} to be parsed", every=2)
    stack.request("PATCH", f"/api/v2/dags/{OTHER_TEAM_DAG}", {"is_paused": False})
    other_team = stack.trigger(OTHER_TEAM_DAG)
    first = run_pipeline(stack, timeout=timeout + 120, allow_failure=True)
    night_one = (first, stack.run_state(stack.dag_id, first))
    _job_created(stack, other_team, timeout)
    return [night_one, *later_nights(stack, first, 2, nights - 1, timeout, other_team=[other_team])]


def later_nights(
    stack: LocalStack,
    first_run: str,
    first_night: int,
    nights: int = PLAN_NIGHTS,
    timeout: float = 300,
    other_team: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Nights ``first_night`` on (``first_run``: night 1's run, the day they count back from); then the other
    team's runs of those nights and ``other_team`` ended."""
    other_team = list(other_team)
    runs = [
        _one_night(stack, first_run, night, other_team, timeout) for night in range(first_night, first_night + nights)
    ]
    _other_team_done(stack, first_night + nights - 1, other_team, timeout)
    return runs


def _one_night(stack: LocalStack, first_run: str, night: int, other_team: list[str], timeout: float) -> tuple[str, str]:
    """Night ``night``: the clock moved to it, the other team's job and the pipeline triggered, the pipeline's
    run waited for (the other team's job runs most of a day: its run is waited for by :func:`_other_team_done`)."""
    import datetime as dt

    import pendulum

    # A minute after that night's weather changes. The other team's job may still be waiting out its hour:
    # SageMaker ends that wait at the hour exactly (the emulator's pending limit is an event at creation plus
    # the limit, handled as the clock moves past it), so moving on changes none of its figures.
    _clock_to(stack, (night - 1) * NIGHT_SECONDS + 60.0)
    # Before 02:00 UTC the scheduled run (night 1) is yesterday's, not today's: later nights count back from it,
    # a day each (a run needs a day: templates use ``ds``).
    logical_date = stack.dag_run(stack.dag_id, first_run)["logical_date"]
    scheduled_day = (
        pendulum.instance(dt.datetime.fromisoformat(logical_date))
        if logical_date
        else pendulum.today("UTC").add(hours=2)
    )
    other_team.append(stack.trigger(OTHER_TEAM_DAG))
    run_id = stack.trigger(stack.dag_id, scheduled_day.subtract(days=night - 1).to_iso8601_string())
    ended = stack.wait_run_done(stack.dag_id, run_id, timeout=timeout)
    _job_created(stack, other_team[-1], timeout)
    return run_id, ended


def _job_created(stack: LocalStack, other_run: str, timeout: float) -> None:
    """The other team's task of that night has created its job (it waits on it deferred, or has ended): on a busy
    machine the pipeline can end first, and a job created after the clock moves on lands on the next night."""

    def created() -> bool:
        states = [ti["state"] for ti in stack.task_instances(OTHER_TEAM_DAG, other_run)]
        return bool(states) and all(state not in (None, "scheduled", "queued", "running") for state in states)

    wait_for(created, timeout, f"run {other_run} of {OTHER_TEAM_DAG} to create its job", every=2)


def _other_team_done(stack: LocalStack, last_night: int, other_team: list[str], timeout: float) -> None:
    """The other team's runs, ended: the clock moves on to the next night, past its last job's 20 hours."""
    _clock_to(stack, last_night * NIGHT_SECONDS + 60.0)
    for other_run in other_team:
        stack.wait_run_done(OTHER_TEAM_DAG, other_run, timeout=timeout)


def _clock_to(stack: LocalStack, seconds_after_start: float) -> None:
    """The emulator's clock moved on to ``seconds_after_start`` (never back)."""
    health = control(stack.emulator_url, "health")
    behind = float(health["scenario_start"]) + seconds_after_start - float(health["virtual_time"])
    if behind > 0:
        control(stack.emulator_url, "advance", {"seconds": behind})


def other_team_line(stack: LocalStack, night: int) -> str:
    """What the other team's job on ml.p5.48xlarge saw that night, from the ledger."""
    from airflow_sm_prefs.evidence import ledger_reading
    from airflow_sm_prefs.platform.formatting import format_seconds

    theirs = sorted(
        (e for e in ledger_reading.read(stack.ledger_root, dag_id=OTHER_TEAM_DAG).entries if e["created_at"]),
        key=lambda e: e["created_at"] or "",
    )
    if night > len(theirs):
        return f"{OTHER_TEAM_DAG}: no job recorded"
    job = theirs[night - 1]
    said = f"{OTHER_TEAM_DAG} (1 x ml.p5.48xlarge alone, 20 h)"
    if job["selected_rank"] is None:
        return f"{said}: waited {format_seconds(job['pending_seconds'])}, got none"
    plan = job.get("training_plan_arn")
    where = f" on training plan {plan.rpartition('/')[2]}" if plan else ""
    return f"{said}: got it{where} after {format_seconds(job['pending_seconds'])}"


def night_record(stack: LocalStack, run_id: str, task_id: str) -> dict[str, Any] | None:
    """The task's record: its return value, or the record it pushed when its job did not complete."""
    found = stack.xcom(stack.dag_id, run_id, task_id) or stack.xcom(stack.dag_id, run_id, task_id, key="record")
    return dict(found) if isinstance(found, dict) else None


def results_table(records: dict[str, dict[str, Any] | None]) -> str:
    from airflow_sm_prefs.platform.formatting import format_seconds

    header = f"{'task':<14} {'configuration':<24} {'preference':<16} {'pending':>9} {'run':>9}  status"
    lines = [header, "-" * len(header)]
    for task_id, record in records.items():
        if record is None or record["selected_instance_type"] is None:
            lines.append(f"{task_id:<14} {'(no configuration)':<24}")
            continue
        config = f"{record['selected_instance_count']} x {record['selected_instance_type']}"
        rank = record["selected_rank"]
        preference = f"#{rank + 1} of {len(record['preferences'])}" + (" fallback" if record["fell_back"] else "")
        lines.append(
            f"{task_id:<14} {config:<24} {preference:<16} {format_seconds(record['pending_seconds']):>9} "
            f"{format_seconds(record['run_seconds'] or 0):>9}  {record['status']}"
        )
    return "\n".join(lines)


def refresh_prices(stack: LocalStack) -> int:
    """What `airflow-sm-prefs prices refresh` does, from the emulated Price List API into the stack's default
    price table (the scenario's made-up prices: the demo's costs are not AWS's)."""
    from airflow_sm_prefs.reference import price_list

    client = stack.aws_client("pricing")
    retrieved = price_list.retrieve(client, ["us-east-1"])
    written = stack.workdir / "prices.json"
    written.unlink(missing_ok=True)
    price_list.write(retrieved, written, client.meta.endpoint_url)
    stack.write_shared("prices.json", written.read_bytes())
    return retrieved.count()


def capacity_report(stack: LocalStack) -> str:
    """What `airflow-sm-prefs report` prints for this stack's ledger."""
    from airflow_sm_prefs.analysis import report, report_text
    from airflow_sm_prefs.evidence import ledger_reading

    return report_text.render(report.summarize(ledger_reading.read(stack.ledger_root).entries), "table")


def plans_command(stack: LocalStack, *arguments: str) -> str:
    """What ``airflow-sm-prefs ARGUMENTS`` prints on this stack (SageMaker's offerings and plans from the
    emulator); a StackError with its last error lines when it fails."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "airflow_sm_prefs.surface.cli", *arguments],
        env=stack.airflow_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise StackError(f"`airflow-sm-prefs {' '.join(arguments)}` failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def as_typed(arguments: Sequence[str], output: str) -> str:
    """A command and what it printed, as a person at a terminal would see them."""
    return f"$ airflow-sm-prefs {' '.join(arguments)}\n{output.rstrip()}"


def plans_chapter(stack: LocalStack) -> tuple[str, str]:
    """`airflow-sm-prefs plans advise`, then `plans reserve` of the offering it advises, capped at its fee: what
    both printed, and the name of the plan bought. The clock is then moved on until the plan is Active.

    An offering starts on the hour, so SageMaker carves new ones each hour: the emulator's clock stands still from
    just past an hour while the commands run (a person buys within minutes; a busy machine may take longer than
    a virtual hour, a real minute at the scenario's speed), then runs again."""
    import json

    was = control(stack.emulator_url, "clock", {"speed": 0})["was"]
    try:
        _clock_to_just_past_an_hour(stack)
        said = [as_typed(["plans", "advise"], plans_command(stack, "plans", "advise"))]
        advice = json.loads(plans_command(stack, "plans", "advise", "--format", "json"))
        advised = [group for group in advice if group["verdict"] == "reserve"]
        if not advised:
            raise StackError("`airflow-sm-prefs plans advise` advised no plan: see what it printed above")
        bought = _reserve(stack, advised[0]["offering"], said)
        plan = next(line for line in bought.splitlines() if line.startswith("ARN: ")).rpartition("/")[2]
        _clock_to_active(stack, plan)
    finally:
        control(stack.emulator_url, "clock", {"speed": was})
    return "\n\n".join(said), plan


def _reserve(stack: LocalStack, offering: dict[str, Any], said: list[str]) -> str:
    reserve = ["plans", "reserve", offering["offering_id"], "--max-usd", f"{offering['upfront_fee']:.2f}", "--yes"]
    try:
        bought = plans_command(stack, *reserve)
    except StackError as error:
        said.append(as_typed(reserve, str(error)))
        raise
    said.append(as_typed(reserve, bought))
    return bought


def _clock_to_just_past_an_hour(stack: LocalStack) -> None:
    health = control(stack.emulator_url, "health")
    next_hour = (float(health["virtual_time"]) // HOUR_SECONDS + 1) * HOUR_SECONDS
    _clock_to(stack, next_hour + 10.0 - float(health["scenario_start"]))


def _clock_to_active(stack: LocalStack, plan: str, timeout: float = 120) -> None:
    """The clock moved on to the plan's start, then a minute at a time, until SageMaker says it is Active."""
    sagemaker = stack.aws_client("sagemaker")

    def active() -> bool:
        described = sagemaker.describe_training_plan(TrainingPlanName=plan)
        if described["Status"] == "Active":
            return True
        now = float(control(stack.emulator_url, "health")["virtual_time"])
        starts = described.get("StartTime")
        step = max(60.0, starts.timestamp() - now + 1.0) if starts is not None else 60.0
        control(stack.emulator_url, "advance", {"seconds": step})
        return False

    wait_for(active, timeout, f"training plan {plan} to be Active", every=0.1)


def plans_used(stack: LocalStack) -> str:
    """What `airflow-sm-prefs plans used` prints: what each plan of the account bought."""
    return as_typed(["plans", "used"], plans_command(stack, "plans", "used"))


def print_night(stack: LocalStack, night: int, run_id: str, state: str) -> None:
    records = {task_id: night_record(stack, run_id, task_id) for task_id in SAGEMAKER_TASKS}
    print(f"\nNight {night}: the run {state}")
    print(results_table(records))
    print(other_team_line(stack, night), flush=True)


def closing_lines(stack: Any, exit_when_done: bool) -> list[str]:
    """Where to look next: the UI while it stays up; with DEMO_EXIT=1 it stops with the demo, so no address."""
    if exit_when_done:
        return ["Done (DEMO_EXIT=1: Airflow and the emulator stop now; `make demo` alone keeps them up)."]
    return [
        f"Capacity page: {stack.api_url}/plugin/sm-prefs-capacity (training plans: /sm-prefs/capacity/plans)",
        f"Log in as admin with the password generated for this run: {stack.admin_password()}",
        "Explore the UI; press Ctrl-C to stop.",
    ]


def main(project_dir: Path, exit_when_done: bool) -> int:
    stack = LocalStack(project_dir=project_dir, workdir=project_dir / ".demo", scenario=WEATHER_SCENARIO)
    print(VIRTUAL_TIME_NOTE)
    print(f"Starting the SageMaker emulator ({stack.scenario}) and Airflow on 127.0.0.1 ...", flush=True)
    try:
        with stack:
            priced = refresh_prices(stack)
            print(
                f"Read {priced} prices from the emulated Price List API (the scenario's own, made up: not AWS's).",
                flush=True,
            )
            print(f"Certifying the fine-tuning candidates ({CERTIFICATION_DAG}) ...", flush=True)
            decided = certify(stack)
            print(certification_table(decided))
            print(f"Registry written: {decided['registry']}\n")
            print(stack.shared_copy("certified.yaml").read_text())
            print(
                f"Airflow is up at {stack.api_url}; running the nightly_evaluation pipeline for {NIGHTS} nights of "
                "GPU weather ...",
                flush=True,
            )
            nights = run_nights(stack)
            for night, (run_id, state) in enumerate(nights, start=1):
                print_night(stack, night, run_id, state)
            last_good = next((run_id for run_id, state in reversed(nights) if state == "success"), None)
            if last_good is not None:
                model = stack.xcom(stack.dag_id, last_good, "inspect_model")
                files = ", ".join(model["files"])
                print(f"\nModel written by fine_tune: {model['model_artifact']} ({model['bytes']} bytes: {files})")
            print("\nThe capacity report (`airflow-sm-prefs report`):\n")
            print(capacity_report(stack))
            print("\nWould a Flexible Training Plan pay? (docs/capacity-planning.md)\n", flush=True)
            said, plan = plans_chapter(stack)
            print(said)
            print(
                f"\nTwo more nights, with {plan} Active ({OTHER_TEAM_DAG} lists training_plans='auto') ...", flush=True
            )
            for night, (run_id, state) in enumerate(later_nights(stack, nights[0][0], NIGHTS + 1), start=NIGHTS + 1):
                print_night(stack, night, run_id, state)
            print("\nWhat the plans bought:\n")
            print(plans_used(stack))
            print()
            print("\n".join(closing_lines(stack, exit_when_done)), flush=True)
            if exit_when_done:
                return 0
            while all(process.poll() is None for process in stack.processes):
                time.sleep(1)
            return 1
    except KeyboardInterrupt:
        return 0
    except (StackError, TimeoutError) as error:
        print(f"demo failed: {error}", file=sys.stderr)
        return 1
