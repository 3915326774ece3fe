"""Each job's utilization, read from the emulator's CloudWatch once it ended, in the record, the ledger and the
report; a metric that cannot be read is unknown, with one warning, and the task stays green."""

from __future__ import annotations

import csv
import io
import json

import pytest

from airflow_sm_prefs.analysis import report, report_text
from airflow_sm_prefs.evidence import ledger_reading
from airflow_sm_prefs.surface.operators import SageMakerPreferenceTrainingOperator
from sm_prefs_devkit.emulator.scenario import parse_faults
from tests.helpers import FakeTI, TaskLog, training_request
from tests.operators.test_operator import context, training_operator

pytestmark = pytest.mark.emulator

P5, P4D, G5 = ("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2), ("ml.g5.48xlarge", 1)


def _run(conn_id: str, night: int, preferences: list) -> dict:
    config = training_request(f"eval-{night}")
    operator = training_operator(conn_id, config=config, preferences=preferences, deferrable=False)
    return operator.execute(context(FakeTI(run_id=f"scheduled__night-{night}")))


def test_a_run_on_two_configurations_shows_each_ones_gpu_utilization(start_emulator, aws_connection, ledger_folder):
    conn_id = aws_connection(start_emulator("gpu-shortage"))
    on_p4d = _run(conn_id, 1, [P5, P4D])  # p5 is sold out: 2 x p4d, 91 % in the scenario
    on_g5 = _run(conn_id, 2, [P5, G5])  # 1 x g5.48xlarge, 34 %
    for record, expected in ((on_p4d, 91), (on_g5, 34)):
        gpu = record["utilization"]["gpu"]
        assert expected - 4 <= gpu["mean"] <= expected + 4 and gpu["mean"] <= gpu["p90"] <= expected + 4, record
        assert record["utilization"]["cpu"] is not None and record["utilization"]["memory"] is not None
    entries = ledger_reading.read().entries
    assert {e["job_name"]: e["utilization"]["gpu"]["mean"] for e in entries} == {
        "eval-1": on_p4d["utilization"]["gpu"]["mean"],
        "eval-2": on_g5["utilization"]["gpu"]["mean"],
    }
    (row,) = report.summarize(entries)
    shown = {c["instance_type"]: c["utilization"]["gpu"]["mean"] for c in row["configurations"]}
    assert shown == {
        "ml.p4d.24xlarge": on_p4d["utilization"]["gpu"]["mean"],
        "ml.g5.48xlarge": on_g5["utilization"]["gpu"]["mean"],
    }
    text = report_text.render([row], "table")
    assert f"#2 2 x ml.p4d.24xlarge: 1 job, GPU {on_p4d['utilization']['gpu']['mean']:.0f}% (p90" in text
    assert f"#2 1 x ml.g5.48xlarge: 1 job, GPU {on_g5['utilization']['gpu']['mean']:.0f}% (p90" in text
    assert json.loads(report_text.render([row], "json"))[0]["configurations"][0]["utilization"]["gpu"] is not None
    (parsed,) = csv.DictReader(io.StringIO(report_text.render([row], "csv")))
    assert "GPU " in parsed["configurations"]


def test_an_unreadable_metric_is_unknown_with_one_warning_and_the_task_green(
    start_emulator, aws_connection, ledger_folder, monkeypatch
):
    server = start_emulator("gpu-shortage")
    conn_id = aws_connection(server)
    server.emulator.faults = parse_faults({"deny": ["GetMetricData"]})
    task_log = TaskLog()
    monkeypatch.setattr(SageMakerPreferenceTrainingOperator, "log", property(lambda self: task_log), raising=False)
    record = _run(conn_id, 1, [P5, P4D])
    assert record["status"] == "Completed" and record["utilization"] is None
    warnings = [m for m in task_log.messages if "Utilization of SageMaker" in m]
    assert len(warnings) == 1 and "cloudwatch:GetMetricData" in warnings[0], warnings
    (entry,) = ledger_reading.read().entries
    assert entry["utilization"] is None
    (row,) = report.summarize([entry])
    assert "utilization unknown" in report_text.render([row], "table")
