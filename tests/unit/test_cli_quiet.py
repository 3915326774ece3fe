"""A command that answers prints its answer and its errors: Airflow's and the AWS SDK's own lines only with
``--verbose`` (each run in a fresh interpreter: logging is configured once a process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _command(argv: tuple[str, ...], environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_sm_prefs.surface.cli", *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def _report(tmp_path, *argv: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__SM_PREFS__LEDGER_PATH": f"file://{tmp_path}/ledger",
    }
    return _command(argv or ("report",), environment)


def test_the_answer_alone_by_default(tmp_path):
    quiet = _report(tmp_path)
    assert (quiet.returncode, quiet.stdout.strip()) == (0, "No jobs in the capacity ledger for this selection.")
    assert "INFO:" not in quiet.stderr, quiet.stderr


@pytest.mark.parametrize("argv", [("report", "--verbose"), ("--verbose", "report")])
def test_verbose_shows_airflows_own_lines_wherever_it_is_given(tmp_path, argv):
    verbose = _report(tmp_path, *argv)
    assert verbose.returncode == 0, verbose.stderr
    assert "INFO:airflow.configuration:Reading the config" in verbose.stderr


def test_airflows_structured_log_is_quiet_too(tmp_path):
    """The AWS hook and S3's file system log through Airflow's structured log, not the standard one; a store
    that cannot be reached (nothing listens on port 9) is the one line of the failure, nothing before it."""
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("AIRFLOW__")},
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__SM_PREFS__STORAGE": "s3://team-bucket/sm-prefs",
        "AIRFLOW__SM_PREFS__STORAGE_TIMEOUT": "3",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    shown = _command(("prices", "show"), environment)
    assert shown.returncode != 0 and shown.stdout == ""
    assert shown.stderr.startswith("airflow-sm-prefs: error: ") and shown.stderr.count("\n") == 1, shown.stderr
