"""Why a job failed, end to end on the emulator: a mistyped bucket is the request's fault and never the GPU's;
a CUDA error or an out-of-memory on one type is that type's (the failure-causes scenario)."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_sm_prefs.analysis import advisor, report
from airflow_sm_prefs.evidence import ledger_reading
from tests.helpers import FakeTI, training_request
from tests.operators.test_operator import context, training_operator

pytestmark = pytest.mark.emulator

P5, P4D, G6, G5 = ("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g6.48xlarge", 1), ("ml.g5.12xlarge", 1)


def _run(conn_id: str, night: int, preferences: list[Any], output: str = "s3://bucket/output") -> str | None:
    """One night's task instance, blocking; the failure's message, or None when the job completed."""
    config = training_request(f"eval-{night}") | {"OutputDataConfig": {"S3OutputPath": output}}
    operator = training_operator(conn_id, config=config, preferences=preferences, deferrable=False)
    try:
        operator.execute(context(FakeTI(run_id=f"scheduled__night-{night}")))
    except AirflowException as error:
        return str(error)
    return None


def test_a_mistyped_bucket_blames_the_request_never_the_fallback(start_emulator, aws_connection, ledger_folder):
    conn_id = aws_connection(start_emulator("failure-causes"))
    assert _run(conn_id, 1, [P5, P4D]) is None and _run(conn_id, 2, [P5, P4D]) is None
    message = _run(conn_id, 3, [P5, P4D], output="s3://bucket-typo/output")
    assert message is not None
    headline = message.splitlines()[0]  # the job's last log lines follow it
    assert "the bucket 'bucket-typo' does not exist" in headline and "Fix the request" in headline
    assert "ml.p4d.24xlarge" not in headline and "fallback type" not in message

    entries = ledger_reading.read().entries
    failed = next(e for e in entries if e["job_name"] == "eval-3")
    assert (failed["outcome"], failed["failure_cause"]) == ("failed_after_start", "configuration")
    (row,) = report.summarize(entries)
    assert row["verdict"] != "incompatible_fallback", row["reason"]
    assert row["failures_by_cause"] == {"configuration": 1}
    assert (
        "1 job failed on the request itself (ClientError: Artifact upload failed: the bucket 'bucket-typo'"
        in (row["summary"])
    )
    labels = [c["candidate"] for c in advisor.advise(entries)["candidates"]]
    assert not any(label.startswith("without #2") for label in labels), labels


@pytest.mark.parametrize(
    ("fallback", "rule"),
    [(G6, "the GPU architecture or driver"), (G5, "GPU out of memory")],
    ids=["cuda-error", "out-of-memory"],
)
def test_a_failure_that_names_the_gpu_makes_the_fallback_incompatible(
    start_emulator, aws_connection, ledger_folder, fallback, rule
):
    conn_id = aws_connection(start_emulator("failure-causes"))
    messages = [_run(conn_id, night, [P5, fallback]) for night in range(3)]
    assert all(m is not None and f"this failure points at the hardware ({rule})" in m for m in messages), messages
    assert all(f"1 x {fallback[0]} (preference #2)" in m for m in messages if m)

    entries = ledger_reading.read().entries
    assert {e["failure_cause"] for e in entries} == {"hardware"}
    (row,) = report.summarize(entries)
    assert row["verdict"] == "incompatible_fallback"
    assert (
        row["reason"]
        == f"1 x {fallback[0]} (#2) failed on its hardware in 3 of 3 jobs; the first choice never ran in the window"
    )
    labels = [c["candidate"] for c in advisor.advise(entries)["candidates"]]
    assert "without #2 (failed on its hardware in 3 of 3)" in labels
