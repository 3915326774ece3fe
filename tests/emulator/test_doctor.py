"""`airflow-sm-prefs doctor` against the emulator: each check's line when all is well and when it is not."""

from __future__ import annotations

import json
import re
import time

import pytest

from airflow_sm_prefs.surface import cli
from sm_prefs_devkit.emulator.scenario import parse_faults
from tests.emulator.test_store_faults import DEADLINE, SAID, _apply
from tests.helpers import boto_client

pytestmark = pytest.mark.emulator

# SageMaker straight to the emulator; the store through the proxy that misbehaves on purpose (``store``).
SAGEMAKER = ["doctor", "--aws-conn-id", "pricing"]


def _doctor(capsys, argv: list[str]) -> tuple[int, dict[str, list[tuple[str, str]]]]:
    capsys.readouterr()
    code = cli.main([*argv, "--format", "json"])
    found: dict[str, list[tuple[str, str]]] = {}
    for finding in json.loads(capsys.readouterr().out):
        found.setdefault(finding["check"], []).append((finding["status"], f"{finding['detail']}; {finding['fix']}"))
    return code, found


def test_a_healthy_host_is_all_ok_and_says_what_it_did_not_try(store, capsys):
    code, found = _doctor(capsys, SAGEMAKER)
    assert code == 0, found
    assert [status for status, _ in found["sagemaker"]] == ["ok", "skip"]
    assert "7 actions allowed" in found["sagemaker"][0][1] and "creating is never harmless" in found["sagemaker"][1][1]
    for check in ("connection", "botocore", "airflow", "store", "prices", "registry"):
        assert [status for status, _ in found[check]] == ["ok"], (check, found[check])
    assert "Region us-east-1" in found["connection"][0][1]
    assert "written, read back and removed a probe object" in found["store"][0][1]
    assert "1 prices, newest from team of 2026-12-01" in found["prices"][0][1]
    _, server = store
    keys = [item["Key"] for item in boto_client(server.endpoint_url, service="s3").list_objects_v2(
        Bucket="team-bucket")["Contents"]]  # fmt: skip
    assert not [key for key in keys if ".doctor-" in key], "the probe removed"
    assert not any(call.startswith("Create") for call in server.engine.calls), "nothing created"
    capsys.readouterr()
    assert cli.main(SAGEMAKER) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ok    connection    'pricing', Region us-east-1") and len(lines) == 8


def test_each_denied_action_is_named_and_fails_the_check(store, capsys):
    _, server = store
    server.emulator.faults = parse_faults({"deny": ["StopTrainingJob", "ListTags"]})
    code, found = _doctor(capsys, SAGEMAKER)
    assert code == 1
    ((status, said), _) = found["sagemaker"]
    assert status == "fail" and said.startswith("denied: sagemaker:StopTrainingJob, sagemaker:ListTags; allow them")
    assert found["store"][0][0] == "ok", "the other checks still run"


def test_a_connection_that_does_not_exist_fails_and_the_rest_still_runs(store, capsys, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NOPE", raising=False)
    code, found = _doctor(capsys, ["doctor", "--aws-conn-id", "nope"])
    assert code == 1 and found["connection"] == [
        ("fail", "'nope' does not exist; create it (or pass --aws-conn-id); the operators would fall back to the "
                 "host's default credentials")
    ]  # fmt: skip
    assert "sagemaker" not in found and found["store"][0][0] == "ok"


def _count_store_waits(monkeypatch) -> list[str]:
    """Each bounded wait on the store the doctor enters, by what it names."""
    from airflow_sm_prefs.storage import bounded

    entered: list[str] = []
    within = bounded.within

    def counted(what, operation, seconds=None):
        entered.append(what)
        return within(what, operation, seconds)

    monkeypatch.setattr(bounded, "within", counted)
    return entered


def _assert_the_store_alone_failed(found) -> None:
    assert found["sagemaker"][0][0] == "ok", "SageMaker is asked through its own connection"
    for check in ("prices", "registry"):  # neither contradicts the store's line nor waits on it again
        assert found[check] == [("skip", "not checked: the store failed (see its line); ")], (check, found[check])


@pytest.mark.parametrize("fault", ["refused", "blackhole", 403])
def test_a_store_that_fails_is_one_line_within_one_deadline(store, capsys, monkeypatch, fault):
    proxy, _ = store
    _apply(fault, proxy, monkeypatch)
    entered = _count_store_waits(monkeypatch)
    started = time.monotonic()
    code, found = _doctor(capsys, SAGEMAKER)
    assert time.monotonic() - started < 20 * DEADLINE
    assert code == 1
    ((status, said),) = found["store"]
    assert status == "fail" and any(words in said for words in SAID[fault]), said
    _assert_the_store_alone_failed(found)
    assert len(entered) == 1 and entered[0].startswith("the doctor's probe"), entered


def test_a_missing_bucket_fails_the_store_and_nothing_says_ok_on_it(store, capsys, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://team-bukcet/sm-prefs")
    code, found = _doctor(capsys, SAGEMAKER)
    assert code == 1
    # The line `report` and `prices show` say for the same setting (tests/emulator/test_cli.py).
    assert found["store"] == [("fail", "[sm_prefs] storage (s3://team-bukcet/sm-prefs): the bucket 'team-bukcet' "
                                       "does not exist; create it (this package never creates one) or correct the "
                                       "setting")]  # fmt: skip
    _assert_the_store_alone_failed(found)


def test_stale_prices_warn_and_a_broken_registry_fails(store, capsys):
    _, server = store
    s3 = boto_client(server.endpoint_url, service="s3")
    table = {"format": 1, "currency": "USD", "unit": "instance-hour", "source": "team", "retrieved": "2026-01-02",
             "prices": {"us-east-1": {"training": {"ml.p5.48xlarge": "98.32"}}}}  # fmt: skip
    s3.put_object(Bucket="team-bucket", Key="sm-prefs/prices.json", Body=json.dumps(table).encode())
    s3.put_object(Bucket="team-bucket", Key="sm-prefs/certified.yaml", Body=b"format: 1\nworkloads:\n  eval: [\n")
    code, found = _doctor(capsys, SAGEMAKER)
    assert code == 1
    ((status, said),) = found["prices"]
    assert status == "warn" and re.search(
        r"of 2026-01-02 \(\d{3,} days old\); run `airflow-sm-prefs prices refresh`", said
    )
    ((status, said),) = found["registry"]
    assert status == "fail" and "certified.yaml" in said and "not valid YAML" in said


def test_a_sagemaker_endpoint_that_cannot_be_reached_is_said_as_sagemakers(store, capsys, monkeypatch):
    proxy, _ = store
    _apply("refused", proxy, monkeypatch)  # the team's connection points at it for every service
    code, found = _doctor(capsys, ["doctor", "--aws-conn-id", "team_store"])
    assert code == 1 and found["connection"][0][0] == "ok"
    ((status, said),) = found["sagemaker"]
    assert status == "fail" and said.startswith("EndpointConnectionError: Could not connect to the endpoint URL")
    assert "the store" not in said


def test_a_password_in_an_endpoints_user_info_is_never_printed(store, capsys, monkeypatch):
    _, server = store
    endpoint = server.endpoint_url.replace("http://", "http://operator:s3cr3t-pass@")
    extra = {"endpoint_url": endpoint, "region_name": "us-east-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_WITH_PASSWORD",
        json.dumps({"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}),
    )
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://operator:s3cr3t-pass@team-bucket/sm-prefs")
    for output in ("table", "json"):
        capsys.readouterr()
        cli.main(["doctor", "--aws-conn-id", "with_password", "--format", output])
        said = capsys.readouterr()
        assert "s3cr3t-pass" not in said.out + said.err, said.out
        assert "operator:***@" in said.out


def test_a_connection_whose_extra_is_not_json_is_one_line(store, capsys, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", json.dumps({"conn_type": "aws", "extra": "{not json"}))
    code, found = _doctor(capsys, ["doctor", "--aws-conn-id", "broken"])
    assert code == 1
    ((status, said),) = found["connection"]
    assert status == "fail" and said.startswith("'broken': its extra is not valid JSON (Expecting property name")
    assert "sagemaker" not in found
    capsys.readouterr()
    cli.main(["doctor", "--aws-conn-id", "broken"])
    assert "Traceback" not in capsys.readouterr().err
