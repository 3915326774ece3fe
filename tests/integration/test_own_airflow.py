"""docs/own-airflow.md, followed as written: its command blocks run in a shell with a fresh HOME, the emulator
on a free port (the one value changed in them), README's first DAG with the two values the page says to set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sm_prefs_devkit.ports import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "own-airflow.md"
TESTED_HERE = "<!-- commands: tested by tests/integration/test_own_airflow.py -->"
PAGE_PORT = "8907"


def blocks_run_here(page: str) -> list[str]:
    """The page's command blocks this module runs, in order."""
    return re.findall(re.escape(TESTED_HERE) + r"\n```bash\n(.*?)```", page, re.DOTALL)


def readme_dag_as_the_page_says() -> str:
    """README's first DAG with the page's two changes, each of which must still apply."""
    readme = (ROOT / "README.md").read_text()
    code = readme.split("## A first DAG", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    page = PAGE.read_text()
    image = re.search(r"`\"<your image>\"`: any image URI, for example `([^`]+)`", page)
    bucket = re.search(r"`(s3://bucket/models)`: `(s3://[^`]+)`, the bucket that exists", page)
    assert image and bucket, "the page names the two values to change"
    assert '"<your image>"' in code and bucket.group(1) in code, "README's DAG still has the values the page names"
    return code.replace('"<your image>"', json.dumps(image.group(1))).replace(bucket.group(1), bucket.group(2))


def _user_environment(home: Path) -> dict[str, str]:
    """A user's shell: their HOME, the installed commands on PATH, nothing of this test run's Airflow or AWS."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "AWS_", "PYTHONPATH"))}
    return kept | {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{kept.get('PATH', '')}"}


def _until_serving(emulator: subprocess.Popen[str], lines: list[str]) -> None:
    assert emulator.stdout is not None
    for line in emulator.stdout:
        lines.append(line)
        if "SageMaker emulator" in line and " on http://" in line:
            threading.Thread(target=lambda: lines.extend(emulator.stdout or ()), daemon=True).start()
            return
    raise AssertionError(f"the emulator exited: {''.join(lines)[-2000:]}")


def test_readmes_dag_runs_in_your_own_airflow_as_the_page_says(tmp_path):
    start, configure, run = blocks_run_here(PAGE.read_text())
    port = str(free_port())
    environment = _user_environment(tmp_path)
    emulator = subprocess.Popen(
        ["bash", "-c", "exec " + start.strip().replace(f"--port {PAGE_PORT}", f"--port {port}")],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served: list[str] = []
    try:
        _until_serving(emulator, served)
        dags = tmp_path / "airflow-emulator" / "dags"
        dags.mkdir(parents=True)
        (dags / "fine_tune_nightly.py").write_text(readme_dag_as_the_page_says())
        script = "set -euo pipefail\n" + (configure + run).replace(f":{PAGE_PORT}", f":{port}")
        result = subprocess.run(
            ["bash", "-c", script],
            env=environment,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "SageMaker selected preference #2 of 3 (fallback): 2 x ml.p4d.24xlarge" in output, output[-6000:]
    assert "Returned value was: {'shards': 16}" in output, "plan read the record"
    assert re.search(r"state=(DagRunState\.)?success|dag run.*success", output, re.IGNORECASE), output[-3000:]
    listed = json.loads(output[output.index('{\n    "TrainingJobSummaries"') :].split("\n}\n", 1)[0] + "\n}")
    assert [job["TrainingJobStatus"] for job in listed["TrainingJobSummaries"]] == ["Completed"]
    assert "fine_tune_nightly" in output.split('"TrainingJobSummaries"', 1)[1], "the report shows the task"
    # A healthy run says nothing at error level: people search a log for "error" first.
    assert not [line for line in output.splitlines() if "[error" in line], output[-6000:]
