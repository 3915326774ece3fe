"""The Kubernetes values and the IAM policy the docs point to: they parse and name what they should."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = yaml.safe_load((ROOT / "deploy" / "helm-values.yaml").read_text())
POLICY = json.loads((ROOT / "deploy" / "iam-policy.json").read_text())
TEAM_POLICY = json.loads((ROOT / "deploy" / "iam-policy-team-prefix.json").read_text())


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


def _sagemaker_calls(service: str = "sagemaker") -> dict[str, set[str]]:
    """Every operation of ``service`` the package calls by its client method's name (``client.list_training_plans(``),
    by the file that calls it: found in the source, so a new call without its IAM action fails here."""
    import re

    import botocore.session

    methods = (
        botocore.session.get_session()
        .create_client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        .meta.method_to_api_mapping
    )
    package = ROOT / "airflow_sm_prefs"
    sources = {path: path.read_text() for path in package.rglob("*.py")}
    # The package's own functions of the same names (its hook's ``create_job``, ``training_plans.search``).
    own = {name for text in sources.values() for name in re.findall(r"def ([a-z_]+)\(", text)}
    found: dict[str, set[str]] = {}
    for path, text in sources.items():
        for name in re.findall(r"\.([a-z_]+)\(", text):
            if name in methods and name not in own:
                found.setdefault(methods[name], set()).add(path.name)
    return found


def test_the_policy_grants_every_cloudwatch_metrics_call_in_the_source():
    calls = _sagemaker_calls("cloudwatch")
    assert calls == {"GetMetricData": {"host_metrics.py"}}
    allowed = {action for statement in POLICY["Statement"] for action in _list(statement["Action"])}
    assert {f"cloudwatch:{operation}" for operation in calls} <= allowed


def test_the_policies_grant_every_sagemaker_call_in_the_source_and_only_a_person_buys_a_plan():
    calls = _sagemaker_calls()
    assert {"ListTrainingPlans", "DescribeTrainingPlan", "SearchTrainingPlanOfferings", "CreateTrainingPlan"} <= set(
        calls
    )
    allowed = {action for statement in POLICY["Statement"] for action in _list(statement["Action"])}
    buyer = json.loads((ROOT / "deploy" / "iam-policy-plan-buyer.json").read_text())
    by_hand = {action for statement in buyer["Statement"] for action in _list(statement["Action"])}
    assert calls["CreateTrainingPlan"] == {"plan_purchase.py"}
    assert {f"sagemaker:{operation}" for operation in calls if operation != "CreateTrainingPlan"} <= allowed
    assert "sagemaker:CreateTrainingPlan" not in allowed  # the tasks' role never buys
    assert "sagemaker:CreateTrainingPlan" in by_hand and "sagemaker:SearchTrainingPlanOfferings" in by_hand


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def _allows(policy: dict, action: str, key: str) -> bool:
    """IAM's answer for one S3 action on one object (or, with an empty key, the bucket), for Allow statements
    whose resources use ``*`` wildcards (no conditions): what these example policies hold."""
    import fnmatch

    resource = f"arn:aws:s3:::team-bucket/{key}" if key else "arn:aws:s3:::team-bucket"
    return any(
        statement["Effect"] == "Allow"
        and action in _list(statement["Action"])
        and any(fnmatch.fnmatchcase(resource, pattern) for pattern in _list(statement["Resource"]))
        for statement in policy["Statement"]
    )


def test_a_teams_role_writes_its_own_dags_entries_and_reads_every_dags():
    """The reader refuses an entry that lies in the wrong DAG's folder, but only the store can stop a writer:
    with deploy/iam-policy-team-prefix.json a team whose DAG ids start with forecast_ writes there alone."""
    ledger = "sm-prefs/ledger"
    for own in (f"{ledger}/forecast_daily/job-1.json", f"{ledger}/forecast_daily/compacted/2026-10.jsonl"):
        assert _allows(TEAM_POLICY, "s3:PutObject", own) and _allows(TEAM_POLICY, "s3:DeleteObject", own)
    for other in (
        f"{ledger}/billing_nightly/job-1.json",  # another team's DAG
        f"{ledger}/forecast_daily",  # an object where its folder should be
        f"{ledger}/.compaction-lease",  # folding the whole ledger is the platform role's
        "sm-prefs/prices.json",
        "sm-prefs/certified.yaml",
        "other-prefix/forecast_daily/job-1.json",
    ):
        assert not _allows(TEAM_POLICY, "s3:PutObject", other), other
        assert not _allows(TEAM_POLICY, "s3:DeleteObject", other), other
    for shared in (f"{ledger}/billing_nightly/job-1.json", "sm-prefs/prices.json", "sm-prefs/certified.yaml"):
        assert _allows(TEAM_POLICY, "s3:GetObject", shared), "a report draws on every DAG's evidence"
    assert _allows(TEAM_POLICY, "s3:ListBucket", ""), "the ledger is read from a listing; HeadBucket needs it too"
    # The platform's own role (deploy/iam-policy.json) writes everything, and folds the ledger.
    assert _allows(POLICY, "s3:PutObject", f"{ledger}/.compaction-lease")
    assert _allows(POLICY, "s3:DeleteObject", f"{ledger}/billing_nightly/job-1.json")
