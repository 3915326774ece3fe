"""``airflow-sm-prefs emulator``: every wrong argument or scenario value is one error line and exit status 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from airflow_sm_prefs.surface import cli


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        status = cli.main(["emulator", *argv])
    except SystemExit as exit_:  # argparse's own refusals
        status = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


SCENARIO_VALUES = {
    "speed as a word": "speed: fast",
    "negative speed": "speed: -1",
    "NaN speed": "speed: .nan",
    "infinite startup": "startup_seconds: .inf",
    "negative download time": "download_seconds: -5",
    "failures as a number": "failures: 5",
    "an event at a word": "events: [{at: soon, set_capacity: {ml.p5.48xlarge: 1}}]",
    "a boolean count": "capacity: {ml.p5.48xlarge: true}",
    "a fractional count": "capacity: {ml.p5.48xlarge: 1.5}",
    "a boolean default capacity": "default_capacity: yes",
    "a negative quota": "quotas: {ml.p5.48xlarge: -2}",
    "a rate as text": "faults: {throttle_rate: half}",
    "deny as text": "faults: {deny: CreateTrainingJob}",
    "a list at the top": "- ample",
    "a misspelt key": "capactiy: {ml.p5.48xlarge: 1}",
    "a bad behaviour": "behaviour: {pending_timeout_status: Exploded}",
    "a plan count as text": "training_plans: [{arn: a, instance_type: ml.p5.48xlarge, count: two}]",
    "a runtime as a duration string": "runtime_seconds: {default: 4h}",
    "an account id that is not 12 digits": "account_id: '42'",
    "broken YAML": "speed: [1,",
    "an empty file": "",
}


@pytest.mark.parametrize("name", sorted(SCENARIO_VALUES))
def test_a_wrong_scenario_value_is_one_error_line(capsys, tmp_path, name):
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(SCENARIO_VALUES[name] + "\n")
    status, err = _run(capsys, "--scenario", str(scenario), "--port", "0")
    assert status == 2
    assert err.startswith("airflow-sm-prefs: error: ") and str(scenario) in err


def test_a_scenario_file_that_cannot_be_read_is_one_error_line(capsys, tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"speed: \xff\xfe\n")
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    for path, expected in ((tmp_path / "missing.yaml", "cannot read"), (binary, "UTF-8"), (folder, "cannot read")):
        status, err = _run(capsys, "--scenario", str(path), "--port", "0")
        assert status == 2 and expected in err, err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--port", "70000"], "outside 0-65535"),
        (["--port", "-1"], "outside 0-65535"),
        (["--port", "http"], "not a port number"),
        (["--host", "sagemaker.example"], "IP address"),
        (["--host", "0.0.0.0"], "loopback only"),
        (["--scenario", "no-such-scenario"], "bundled"),
    ],
)
def test_a_wrong_argument_is_exit_status_two(capsys, argv, expected):
    status, err = _run(capsys, *argv)
    assert status == 2 and expected in err, err


def test_a_port_in_use_is_one_error_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, err = _run(capsys, "--port", str(port))
    assert status == 2 and "cannot listen" in err


EMPTY_STATE = {
    "format": 1,
    "origin": 0,
    "now": 0,
    "seq": 0,
    "events": [],
    "capacity_override": {},
    "held": {},
    "plan_used": {},
    "jobs": [],
}


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps([1, 2, 3]),
        json.dumps({"format": 99}),
        json.dumps({**EMPTY_STATE, "jobs": [{"kind": 5}]}),
        json.dumps({**EMPTY_STATE, "origin": "yesterday"}),
    ],
    ids=["not JSON", "a list", "another format", "a job missing its fields", "a time that is text"],
)
def test_a_damaged_state_file_is_one_error_line(capsys, tmp_path, content):
    state = tmp_path / "state.json"
    state.write_text(content)
    status, err = _run(capsys, "--port", "0", "--state-file", str(state))
    assert status == 2 and "move it away" in err, err


def test_a_state_file_in_a_missing_directory_is_refused_before_serving(capsys, tmp_path: Path):
    status, err = _run(capsys, "--port", "0", "--state-file", str(tmp_path / "nowhere" / "state.json"))
    assert status == 2 and "does not exist" in err


def test_a_null_quota_means_unlimited_as_the_readme_says(tmp_path):
    from sm_prefs_devkit.emulator import load

    scenario = tmp_path / "quota.yaml"
    scenario.write_text("default_quota: 1\nquotas: {ml.p5.48xlarge: null}\n")
    loaded = load(str(scenario))
    assert loaded.quota_for("ml.p5.48xlarge") is None and loaded.quota_for("ml.g5.48xlarge") == 1


def test_a_non_loopback_host_warns_that_the_api_has_no_authentication(capsys, monkeypatch):
    from sm_prefs_devkit.emulator import server as server_module

    def refuse_to_bind(*args: object, **kwargs: object) -> None:
        raise OSError(99, "Cannot assign requested address")

    # Stop before serving: the warning is printed before the server binds.
    monkeypatch.setattr(server_module.EmulatorServer, "__init__", refuse_to_bind)
    status, err = _run(capsys, "--host", "10.255.255.1", "--container-network", "--port", "0")
    assert "no authentication" in err
    assert status == 2
