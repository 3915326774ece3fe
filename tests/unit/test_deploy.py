"""The Kubernetes values and the IAM policy the docs point to: they parse and name what they should."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = yaml.safe_load((ROOT / "deploy" / "helm-values.yaml").read_text())
POLICY = json.loads((ROOT / "deploy" / "iam-policy.json").read_text())


def test_the_helm_values_run_the_provider_with_two_triggerers_and_irsa():
    assert VALUES["images"]["airflow"]["repository"].endswith("/airflow-sm-prefs")
    assert VALUES["executor"] == "CeleryExecutor"
    assert VALUES["triggerer"]["replicas"] >= 2 and VALUES["workers"]["replicas"] >= 2
    role = "eks.amazonaws.com/role-arn"
    for component in ("triggerer", "workers", "scheduler", "apiServer", "dagProcessor"):
        assert role in VALUES[component]["serviceAccount"]["annotations"], component
    assert "airflow-aws-connection" in VALUES["extraEnvFrom"]
    settings = {item["name"]: item["value"] for item in VALUES["env"]}
    # Every shared file on the one location the IAM policy lets the pods read and write, none on a pod's disk.
    assert settings["AIRFLOW__SM_PREFS__STORAGE"] == "s3://team-bucket/sm-prefs"
    assert not {"LEDGER_PATH", "PRICE_TABLE", "CERTIFICATION_REGISTRY"} & {n.split("__")[-1] for n in settings}
    s3 = next(s for s in POLICY["Statement"] if "s3:PutObject" in _list(s["Action"]))
    assert "arn:aws:s3:::team-bucket/sm-prefs/*" in s3["Resource"] and "s3:DeleteObject" in _list(s3["Action"])


def test_the_iam_policy_grants_every_call_the_provider_makes():
    from airflow_sm_prefs.request.jobs import KINDS

    allowed = {action for statement in POLICY["Statement"] for action in _list(statement["Action"])}
    for kind in KINDS.values():
        for verb in ("Create", "Describe", "Stop"):
            assert f"sagemaker:{verb}{kind.operation_suffix.title().replace('_', '')}" in allowed
        assert f"sagemaker:List{kind.operation_suffix.title().replace('_', '')}s" in allowed
    assert {"sagemaker:AddTags", "sagemaker:ListTags", "iam:PassRole", "servicequotas:ListServiceQuotas"} <= allowed
    assert {"logs:FilterLogEvents", "logs:DescribeLogStreams", "logs:GetLogEvents", "pricing:GetProducts"} <= allowed


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value
