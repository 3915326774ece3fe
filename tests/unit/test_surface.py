"""Metrics and OpenLineage: the Airflow surface around the record."""

from __future__ import annotations

from unittest import mock

from airflow_sm_prefs.evidence import metrics
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.surface.lineage import s3_datasets
from airflow_sm_prefs.surface.operators import SageMakerPreferenceTrainingOperator
from airflow_sm_prefs.wait import announcement
from airflow_sm_prefs.wait.announcement import emit_selection
from tests.helpers import training_request


def test_the_stats_found_on_this_airflow_line_take_tagged_metrics():
    """On each supported line (the platform matrix runs this), the object metrics go to is Airflow's own."""
    stats = metrics._stats()
    for method in ("incr", "gauge", "timing"):
        assert callable(getattr(stats, method))
    stats.incr("sm_prefs.selected", tags={"rank": "1"})  # no StatsD configured: Airflow's no-op logger


def test_selection_metrics_carry_rank_and_fallback():
    with mock.patch.object(announcement, "stats") as found:
        stats = found.return_value
        emit_selection(
            {
                "job_kind": "training",
                "selected_instance_type": "ml.p4d.24xlarge",
                "selected_rank": 1,
                "fell_back": True,
                "pending_seconds": 90.0,
            },
        )
    assert [(c[0], c.args[0]) for c in stats.method_calls] == [
        ("incr", "sm_prefs.selected"),
        ("gauge", "sm_prefs.selected_rank"),
        ("timing", "sm_prefs.pending_seconds"),
        ("incr", "sm_prefs.fallback"),
    ]
    incr = [c for c in stats.method_calls if c[0] == "incr"]
    assert {c.args[0] for c in incr} == {"sm_prefs.selected", "sm_prefs.fallback"}
    assert incr[0].kwargs["tags"] == {"job_kind": "training", "instance_type": "ml.p4d.24xlarge", "rank": "1"}


def test_first_choice_emits_no_fallback():
    with mock.patch.object(announcement, "stats") as found:
        stats = found.return_value
        emit_selection(
            {
                "job_kind": "training",
                "selected_instance_type": "ml.p5.48xlarge",
                "selected_rank": 0,
                "fell_back": False,
                "pending_seconds": 0,
            },
        )
    assert "sm_prefs.fallback" not in [c.args[0] for c in stats.method_calls if c[0] == "incr"]


def test_lineage_datasets_for_both_kinds():
    request = training_request("j", [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}])
    request["InputDataConfig"] = [
        {
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://data/train/2026-11-30"}},
        }
    ]
    description = {"ModelArtifacts": {"S3ModelArtifacts": "s3://models/out/j/output/model.tar.gz"}}
    assert s3_datasets(TRAINING, request, description) == (
        [("s3://data", "train/2026-11-30")],
        [("s3://models", "out/j/output/model.tar.gz")],
    )
    processing = {
        "ProcessingInputs": [{"S3Input": {"S3Uri": "s3://raw/day"}}],
        "ProcessingOutputConfig": {"Outputs": [{"S3Output": {"S3Uri": "s3://shards/day"}}]},
    }
    assert s3_datasets(PROCESSING, processing, {}) == ([("s3://raw", "day")], [("s3://shards", "day")])


def test_openlineage_facets_on_complete():
    request = training_request("j", None)
    request["InputDataConfig"] = [
        {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://data/train"}}}
    ]
    request["ResourceConfig"]["InstanceCount"] = 1
    operator = SageMakerPreferenceTrainingOperator(
        task_id="t", config=request, preferences=["ml.p5.48xlarge"], job_name="j"
    )
    operator._lineage_description = {"ModelArtifacts": {"S3ModelArtifacts": "s3://models/j/model.tar.gz"}}
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("s3://data", "train")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("s3://models", "j/model.tar.gz")]


def test_a_try_without_a_job_reads_no_link_xcom(monkeypatch):
    """Airflow 3 asks each link for its value as a try ends; a try refused before submission must not read the
    links' XComs, which do not exist (each read is an "XCom not found" error line in the task log)."""
    from types import SimpleNamespace

    from airflow.providers.amazon.aws.links import base_aws

    from airflow_sm_prefs.surface.links import SageMakerConsoleLink, SageMakerLogsLink

    reads: list[str] = []

    class XCom:
        @staticmethod
        def get_value(key, ti_key):
            reads.append(key)
            return {"region_name": "us-east-1", "aws_domain": "aws.amazon.com", "job_name": "eval-job"} | {
                "console_fragment": "jobs",
                "escaped_log_group": "$252Faws$252Fsagemaker$252FTrainingJobs",
            }

    monkeypatch.setattr(base_aws, "XCom", XCom)
    operator = SageMakerPreferenceTrainingOperator(
        task_id="t", config=training_request("eval-job", None), preferences=[("ml.g5.12xlarge", 1)]
    )
    for link in (SageMakerConsoleLink(), SageMakerLogsLink()):
        operator._life = None  # refused before its life began (a template, preflight)
        assert link.get_link(operator, ti_key=None) == ""
        operator._life = SimpleNamespace(active_job=None)  # refused by the check before create
        assert link.get_link(operator, ti_key=None) == ""
        assert reads == []
        operator._life = SimpleNamespace(active_job="eval-job")
        assert "eval-job" in link.get_link(operator, ti_key=None)
        assert reads.pop() == link.key
        # The API server's operator (serialized, not running the try) cannot know: it reads what the try kept.
        assert "eval-job" in link.get_link(SimpleNamespace(task_id="t"), ti_key=None)
        assert reads.pop() == link.key


def test_the_deployments_check_interval_is_the_default_and_the_tasks_own_wins(monkeypatch):
    import pytest

    from airflow_sm_prefs.request.preferences import RequestValidationError

    def operator(**kwargs):
        return SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("eval-job", None), preferences=[("ml.g5.12xlarge", 1)], **kwargs
        )

    monkeypatch.delenv("AIRFLOW__SM_PREFS__CHECK_INTERVAL", raising=False)
    assert operator().check_interval == 60.0
    monkeypatch.setenv("AIRFLOW__SM_PREFS__CHECK_INTERVAL", "5")
    assert operator().check_interval == 5.0
    assert operator(check_interval=0.5).check_interval == 0.5
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv("AIRFLOW__SM_PREFS__CHECK_INTERVAL", bad)
        with pytest.raises(RequestValidationError, match=r"\[sm_prefs\] check_interval must be a positive number"):
            operator()


def test_how_a_task_waits_is_read_from_its_operators_arguments():
    from airflow_sm_prefs.platform.redaction import SecretsRead
    from airflow_sm_prefs.surface.operators import waiting_of
    from airflow_sm_prefs.task.task_life import Waiting

    def operator(**kwargs):
        return SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("eval-job", None), preferences=[("ml.g5.12xlarge", 1)], **kwargs
        )

    task = operator(
        deferrable=False, check_interval=7.0, max_pending=1800, wait_timeout=3600, stop_on_kill=False,
        stop_on_timeout=False, resubmit_after_failure=False, stream_logs=True,
    )  # fmt: skip
    task._secrets_read = SecretsRead({("b", False), ("a", True)}, {"warehouse"})  # what rendering recorded
    assert waiting_of(task) == Waiting(
        deferrable=False,
        check_interval=7.0,
        max_pending=1800,
        wait_timeout=3600,
        stop_on_kill=False,
        stop_on_timeout=False,
        resubmit_after_failure=False,
        stream_logs=True,
        retries=0,
        mask_variables=(("a", True), ("b", False)),
        mask_connections=("warehouse",),
    )
    assert waiting_of(operator(finish_by="2030-01-01T00:00:00+00:00", retries=3)).retries == 3
