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
