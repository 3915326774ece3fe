"""The capacity report on evidence the emulator produces: two teams sharing a Region's capacity for eight
nights (scenario ``shared-region``), their jobs created through boto3 over HTTP, their ledger entries built
from what Describe answered. Team A's fallback saved a four-hour wait on the nights it was taken."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.analysis import advisor, report, weather
from airflow_sm_prefs.analysis.counterfactual import Timeline
from airflow_sm_prefs.evidence import ledger_entry
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from sm_prefs_devkit.local_stack import control
from tests.helpers import boto_client, training_request

pytestmark = pytest.mark.emulator

TEAM_A = [
    {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
]
TEAM_B = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}]


@pytest.fixture(scope="module")
def eight_nights() -> list[dict]:
    import dataclasses

    from sm_prefs_devkit.emulator import EmulatorServer, load
    from tests.conftest import TEST_BUCKETS

    scenario = load("shared-region")
    server = EmulatorServer(dataclasses.replace(scenario, buckets={**scenario.buckets, **TEST_BUCKETS})).start()
    try:
        client = boto_client(server.endpoint_url)
        start = float(control(server.endpoint_url, "health")["scenario_start"])
        made = []
        for night in range(8):
            behind = start + night * 86400 + 60 - float(control(server.endpoint_url, "health")["virtual_time"])
            control(server.endpoint_url, "advance", {"seconds": max(0.0, behind)})
            for dag, listed in (("team_a", TEAM_A), ("team_b", TEAM_B)):
                name = f"{dag.replace('_', '-')}-night-{night}"
                request = training_request(name, listed)
                request["StoppingCondition"] = {"MaxRuntimeInSeconds": 7200, "MaxPendingTimeInSeconds": 8 * 3600}
                client.create_training_job(**request)
                made.append((dag, name, night))
            control(server.endpoint_url, "advance", {"seconds": 6 * 3600})  # all done within the night
        entries = []
        for dag, name, night in made:
            view = JobView.parse(TRAINING, client.describe_training_job(TrainingJobName=name))
            assert view.status == "Completed", (name, view.status)
            entries.append(
                ledger_entry.entry_for(
                    JobFacts.of(view, "us-east-1"),
                    dag_id=dag,
                    task_id="train",
                    run_id=f"scheduled__{night}",
                    map_index=-1,
                )
            )
        return entries
    finally:
        server.stop()


def test_the_fallback_that_saved_a_four_hour_wait_paid_off(eight_nights):
    rows = {r["dag_id"]: r for r in report.summarize(eight_nights)}
    team_a = rows["team_a"]
    assert team_a["rank_counts"] == {"#1": 4, "#2": 4}
    assert team_a["verdict"] == "paid_off", team_a["reason"]
    wait = team_a["first_choice_wait"]
    assert (wait["observed"], wait["sources"]) == (4, ["team_a.train", "team_b.train"])
    assert 3.9 * 3600 <= wait["p50_seconds"] <= 4.1 * 3600, wait
    fallback = next(c for c in team_a["configurations"] if c["rank"] == 1)
    assert fallback["break_even_wait_seconds"] == pytest.approx(1800, abs=120)  # 1.5 h run - 1 h run


def test_without_the_other_team_the_report_says_what_would_decide_it(eight_nights):
    (team_a,) = report.summarize([e for e in eight_nights if e["dag_id"] == "team_a"])
    assert team_a["verdict"] == "not_enough_data"
    assert team_a["reason"].startswith("the fallback pays off if the first choice would have stayed unavailable")


def test_the_advisor_and_the_weather_read_the_same_nights(eight_nights):
    history = [e for e in eight_nights if e["dag_id"] == "team_a"]
    advice = {r["candidate"]: r for r in advisor.advise(history, Timeline(eight_nights))["candidates"]}
    assert advice["the current list"]["nights_with_a_result"] == 8
    assert (
        advice["the first choice alone"]["time_to_result_p90_seconds"]
        > advice["the current list"]["time_to_result_p90_seconds"]
    )
    p5 = next(r for r in weather.weather(eight_nights) if r["instance_type"] == "ml.p5.48xlarge")
    shares = [c["got_it_within_15m_share"] for c in p5["cells"]]
    assert p5["jobs"] == 12 and sorted(set(shares)) != [1.0], "the sold-out nights show in the weather"
