"""`airflow dags test` runs of real DAGs against the emulator over HTTP (the triggers run inline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import IMPORT_DAGBAG
from tests.integration.conftest import HERE, airflow_env

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]
ROOT = Path(__file__).resolve().parents[2]


def _buckets() -> dict[str, tuple[str, ...]]:
    """The test DAGs' S3 data: an evaluation set for the run's day (`airflow dags test` runs today, UTC; the
    day before too, should the run start just after midnight) and the buckets the jobs write to."""
    import pendulum

    today = pendulum.today("UTC")
    days = [today.subtract(days=n).to_date_string() for n in range(2)]
    return {"datasets": tuple(f"eval/{day}/part-0.jsonl" for day in days), "models": ()}


def _connection(server) -> str:
    return json.dumps(
        {
            "conn_type": "aws",
            "login": "testing",
            "password": "testing",
            "extra": {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"},
        }
    )


def _airflow_dags_test(env: dict[str, str], dag_id: str) -> str:
    """`airflow dags test` in its own process; its output, after checking that the run succeeded."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", dag_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    return output


def _assert_job_logs_shown_once(output: str) -> None:
    """Each job's CloudWatch lines reached the task log in order, none twice, through its end."""
    import re

    lines = re.findall(r"(\[[\w.-]+/algo-\d+-\d+\] [^\n\[]*?)(?: \[airflow|\n|$)", output)
    assert lines, "the jobs' log lines appear in the task log"
    assert len(lines) == len(set(lines)), "no line twice"
    ends = [line for line in lines if line.endswith("job completed")]
    assert len({line.split("/")[0] for line in ends}) == 2, "both jobs' last lines were read"


def _dags_test(airflow_home, server, dag_id: str, results) -> dict:
    env = airflow_env(
        airflow_home, HERE / "dags", AIRFLOW_CONN_SM_EMULATOR=_connection(server), SM_PREFS_IT_RESULTS=str(results)
    )
    output = _airflow_dags_test(env, dag_id)
    assert output.count("SageMaker selected preference #2 of 2") == 2, "the selection is logged once per task"
    _assert_job_logs_shown_once(output)
    return json.loads((results / f"{dag_id}.json").read_text())


@pytest.mark.parametrize(
    "dag_id, kind, second_choice, uniform_count",
    [
        ("sm_prefs_it_training", "training", "ml.p4d.24xlarge", 2),
        ("sm_prefs_it_processing", "processing", "ml.g5.12xlarge", 1),
    ],
)
def test_dag_falls_back_to_the_second_preference(
    airflow_home, start_emulator, tmp_path, dag_id, kind, second_choice, uniform_count
):
    server = start_emulator("gpu-shortage", buckets=_buckets())
    results = _dags_test(airflow_home, server, dag_id, tmp_path)
    for task_id, expected_count in (("uniform", uniform_count), ("per_preference", 2)):
        record = results[task_id]["record"]
        assert record["status"] == "Completed", record
        assert (record["job_kind"], record["selected_rank"], record["fell_back"]) == (kind, 1, True)
        assert (record["selected_instance_type"], record["selected_instance_count"]) == (second_choice, expected_count)
        assert set(record) >= {
            "job_name",
            "job_arn",
            "preferences",
            "pending_seconds",
            "run_seconds",
            "billable_seconds",
            "region",
            "created_at",
            "started_at",
            "ended_at",
        }
        assert results[task_id]["selection"]["selected_rank"] == 1
    creates = server.engine.calls["CreateTrainingJob" if kind == "training" else "CreateProcessingJob"]
    assert creates == 2, "one job per task, no duplicates"


def test_invalid_dag_fails_at_parse_time_and_creates_nothing(airflow_home, start_emulator):
    server = start_emulator("gpu-shortage", buckets=_buckets())
    folder = HERE / "invalid_dags"
    code = (
        IMPORT_DAGBAG + "import json; "
        f"bag = DagBag({str(folder)!r}); "
        "print(json.dumps({'dags': sorted(bag.dag_ids), 'errors': list(bag.import_errors.values())}))"
    )
    env = airflow_env(airflow_home, folder, AIRFLOW_CONN_SM_EMULATOR=_connection(server))
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["dags"] == []
    assert "preference #3 (ml.g5.48xlarge): InstanceCount must be an integer" in parsed["errors"][0]
    assert server.engine.calls == {}, "the emulator saw no call at all"


@pytest.mark.parametrize("dag_id", ["fine_tune_old_way", "fine_tune_new_way"])
def test_the_migration_example_runs_both_ways(airflow_home, start_emulator, dag_id):
    """The shipped example DAGs, unchanged, against the emulator with capacity for the first choice."""
    server = start_emulator("ample", buckets=_buckets())
    _airflow_dags_test(airflow_env(airflow_home, ROOT / "dags", AIRFLOW_CONN_AWS_DEFAULT=_connection(server)), dag_id)
    (job,) = server.engine.jobs.values()
    assert (job.status, job.selected["instance_type"]) == ("Completed", "ml.p5.48xlarge")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_sm_prefs.surface.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _task_report(env: dict[str, str], task_id: str) -> dict:
    result = _cli(env, "report", "--dag-id", "sm_prefs_it_training", "--task-id", task_id, "--format", "json")
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = json.loads(result.stdout)
    return row


def test_three_nights_in_the_ledger_survive_db_clean_and_can_be_rebuilt(tmp_path_factory, start_emulator, tmp_path):
    """`airflow dags test` three times on gpu-shortage; the report reads what the runs left in the ledger,
    `airflow db clean` leaves it alone, and a backfill from the jobs' tags rebuilds it."""
    import shutil

    home = tmp_path_factory.mktemp("ledger-home")
    server = start_emulator("gpu-shortage", buckets=_buckets())
    env = airflow_env(
        home,
        HERE / "dags",
        AIRFLOW_CONN_SM_EMULATOR=_connection(server),
        AIRFLOW_CONN_AWS_DEFAULT=_connection(server),
        SM_PREFS_IT_RESULTS=str(tmp_path),
    )
    migrated = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], env=env, capture_output=True, timeout=300
    )
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    refreshed = _cli(env, "prices", "refresh", "--aws-conn-id", "aws_default")
    assert refreshed.returncode == 0, refreshed.stderr[-3000:]
    for _ in range(3):
        _airflow_dags_test(env, "sm_prefs_it_training")
    row = _task_report(env, "per_preference")
    assert (row["runs"], row["fallback_rate"], row["rank_counts"]) == (3, 1.0, {"#2": 3})
    # Every night fell back at once and nothing else listed the first choice then: nothing says how long it
    # stayed sold out, so the report says what would decide it instead of guessing.
    assert row["completed"] == 3 and row["verdict"] == "not_enough_data", row["reason"]
    assert row["reason"].startswith("the fallback pays off if the first choice would have stayed unavailable")
    (configuration,) = row["configurations"]
    assert (configuration["instance_type"], configuration["instance_count"], configuration["jobs"]) == (
        "ml.p4d.24xlarge",
        2,
        3,
    )
    # Priced with what `prices refresh` read from the emulated Price List API: 2 instances x $40 per hour.
    assert configuration["estimated_cost_usd_p50"] == pytest.approx(
        configuration["run_seconds_p50"] * 2 * 40 / 3600, rel=0.02
    )

    cleaned = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow",
            "db",
            "clean",
            "--clean-before-timestamp",
            "2100-01-01",
            "--yes",
            "--skip-archive",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cleaned.returncode == 0, cleaned.stderr[-3000:]
    assert _task_report(env, "per_preference")["runs"] == 3, "db clean leaves the ledger alone"

    shutil.rmtree(home / "sm_prefs" / "ledger")
    backfilled = _cli(env, "ledger", "backfill", "--since", "1d", "--aws-conn-id", "sm_emulator")
    assert backfilled.returncode == 0, backfilled.stderr[-3000:]
    summary = backfilled.stdout.strip().splitlines()[-1]
    assert summary.startswith("6 job(s) listed: 6 added"), backfilled.stdout
    again = _cli(env, "ledger", "backfill", "--since", "1d", "--aws-conn-id", "sm_emulator")
    assert "0 added, 6 already in the ledger" in again.stdout, again.stdout
    rebuilt = _task_report(env, "per_preference")
    assert (rebuilt["runs"], rebuilt["fallback_rate"], rebuilt["rank_counts"]) == (3, 1.0, {"#2": 3})


def test_certification_keeps_the_first_choice_and_rejects_the_fallback_that_fails(
    airflow_home, start_emulator, tmp_path
):
    """`certification_dag` over the incompatible-fallback scenario (its first choice given room): the first
    choice is certified with its measured run time, the fallback whose container fails after starting is
    not; a strict task that still lists the fallback is then refused, at parse time and at run time."""
    from airflow_sm_prefs.preflight import certification

    server = start_emulator("incompatible-fallback", buckets=_buckets())
    server.engine.set_capacity({"ml.p5.48xlarge": 1})
    registry = tmp_path / "certified.yaml"
    env = airflow_env(
        airflow_home,
        HERE / "dags",
        AIRFLOW_CONN_SM_EMULATOR=_connection(server),
        SM_PREFS_IT_RESULTS=str(tmp_path),
        SM_PREFS_IT_REGISTRY=str(registry),
    )
    output = _airflow_dags_test(env, "sm_prefs_it_certification")
    assert "Not certified: 1 x ml.g5.48xlarge: the job ended Failed after starting: AlgorithmError" in output
    (entry,) = certification.read(registry)["it-fine-tune"]
    assert (entry.instance_type, entry.instance_count) == ("ml.p5.48xlarge", 1)
    assert 250 <= entry.run_seconds <= 400 and entry.image_uri.endswith("/eval:1")
    assert entry.certified_by.startswith("sm_prefs_it_certification / ")
    assert server.engine.calls["CreateTrainingJob"] == 2

    from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
    from airflow_sm_prefs.request.preferences import RequestValidationError
    from tests.helpers import training_request

    strict = {"workload": "it-fine-tune", "certified": "strict", "certification_registry": str(registry)}
    with pytest.raises(RequestValidationError, match=r"preference #2 \(1 x ml\.g5\.48xlarge\): not certified"):
        SageMakerPreferenceTrainingOperator(
            task_id="t",
            config=training_request("x", None),
            preferences=[("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 1)],
            **strict,
        )
    SageMakerPreferenceTrainingOperator(
        task_id="t", config=training_request("x", None), preferences=[("ml.p5.48xlarge", 1)], **strict
    )
