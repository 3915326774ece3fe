"""The shipped DAGs parse cleanly, import nothing heavy, and have the shape the README describes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PARSE = """
import json, sys, time
import airflow.sdk
from airflow.dag_processing.dagbag import DagBag
started = time.perf_counter()
bag = DagBag(sys.argv[1])
elapsed = time.perf_counter() - started
nightly = bag.dags["nightly_evaluation"]
print(json.dumps({
    "errors": {k: str(v)[:500] for k, v in bag.import_errors.items()},
    "dags": sorted(bag.dag_ids),
    "heavy": [m for m in ("boto3", "aiobotocore", "airflow_sm_prefs.emulator", "playwright") if m in sys.modules],
    "tasks": sorted(nightly.task_ids),
    "catchup": nightly.catchup,
    "schedule": str(nightly.timetable),
    "seconds": elapsed,
}))
"""


def test_shipped_dags_parse_without_heavy_imports(tmp_path):
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", PARSE, str(ROOT / "dags")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["dags"] == ["fine_tune_new_way", "fine_tune_old_way", "nightly_evaluation"]
    assert parsed["heavy"] == []
    assert parsed["tasks"] == ["fine_tune", "plan_evaluation", "prepare_data", "write_summary"]
    assert parsed["catchup"] is False and "'0 2 * * *'" in parsed["schedule"]
    print(f"parsed dags/ in {parsed['seconds']:.3f}s")


def test_the_fault_campaign_dags_parse(tmp_path):
    """A broken campaign DAG would only show as a 2-minute timeout in the campaign; catch it here."""
    script = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        "bag = DagBag(sys.argv[1])\n"
        "print(json.dumps({'errors': {k: str(v)[:300] for k, v in bag.import_errors.items()}, 'n': len(bag.dags)}))\n"
    )
    env = {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "tests" / "faults" / "dags")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["n"] == 9
