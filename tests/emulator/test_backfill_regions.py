"""``ledger backfill`` over the emulator, for one DAG whose jobs of one name ran in two Regions: a job already
in the ledger in one Region does not hide its namesake in the other (SageMaker's names are unique per account
and Region only)."""

from __future__ import annotations

import pendulum
import pytest

from airflow_sm_prefs.evidence import ledger_reading
from airflow_sm_prefs.evidence.ledger_backfill import backfill
from airflow_sm_prefs.sagemaker import tagging
from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, training_request

pytestmark = pytest.mark.emulator


def test_a_job_known_in_one_region_does_not_hide_its_namesake_in_another(start_emulator, aws_connection, tmp_path):
    server = start_emulator("ample")
    conn_id = aws_connection(server)
    tags = [{"Key": tagging.DAG_ID, "Value": "nightly"}, {"Key": tagging.TASK_ID, "Value": "fine_tune"}]
    for region in ("us-east-1", "eu-west-1"):
        boto_client(server.endpoint_url, region=region).create_training_job(
            **training_request("same-name", GPU_PAIR), Tags=tags
        )
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    root = tmp_path / "ledger"
    since = pendulum.now("UTC").subtract(days=30)

    east = backfill(SageMakerPreferenceHook(aws_conn_id=conn_id, region_name="us-east-1"), since, root, "us-east-1")
    west = backfill(SageMakerPreferenceHook(aws_conn_id=conn_id, region_name="eu-west-1"), since, root, "eu-west-1")
    assert (east.added, west.added, west.already) == (1, 1, 0)
    assert sorted(p.name for p in (root / "nightly").iterdir()) == [
        "same-name.eu-west-1.json",
        "same-name.us-east-1.json",
    ]
    assert sorted(e["region"] for e in ledger_reading.read(root).entries) == ["eu-west-1", "us-east-1"]
    again = backfill(SageMakerPreferenceHook(aws_conn_id=conn_id, region_name="eu-west-1"), since, root, "eu-west-1")
    assert (again.added, again.already) == (0, 1)
