"""A Describe response read as a view: its times in UTC whatever form they come in, what was chosen and when,
and how long the job waited and ran."""

from __future__ import annotations

import datetime as dt

import pendulum

from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView, jsonable, to_time
from tests.unit.test_task_life import described

NOON = pendulum.datetime(2026, 12, 1, 12, 0, tz="UTC")


def test_every_form_of_a_time_is_read_as_utc():
    tokyo = dt.datetime(2026, 12, 1, 21, 0, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    for given in (tokyo, NOON.timestamp(), int(NOON.timestamp()), "2026-12-01T07:00:00-05:00", NOON):
        read = to_time(given)
        assert read == NOON and read is not None and read.utcoffset() == dt.timedelta(0), given
        assert read.timezone_name == "UTC", given
    assert to_time(None) is None
    assert to_time("2026-12-01") is not None, "a date alone is its midnight"
    assert to_time("PT1H") is None, "a duration is no time"


def test_a_response_made_json_keeps_everything_but_the_sdks_metadata():
    response = {
        "TrainingJobName": "j",
        "CreationTime": NOON,
        "ResourceConfig": {"InstancePreferences": [{"InstanceType": "ml.g5.xlarge"}]},
        "ResponseMetadata": {"RequestId": "r"},
        "Tags": ({"Key": "ResponseMetadata", "Value": "kept"},),
    }
    assert jsonable(response) == {
        "TrainingJobName": "j",
        "CreationTime": "2026-12-01T12:00:00+00:00",
        "ResourceConfig": {"InstancePreferences": [{"InstanceType": "ml.g5.xlarge"}]},
        "Tags": [{"Key": "ResponseMetadata", "Value": "kept"}],
    }


def test_before_a_selection_nothing_is_chosen_even_where_an_entry_names_no_type():
    untyped = described("j")
    untyped["ResourceConfig"]["InstancePreferences"].append({"InstanceCount": 3})
    view = JobView.parse(TRAINING, untyped)
    assert (view.selected, view.selected_count, view.selected_rank, view.fell_back) == (None, None, None, None)
    chosen = JobView.parse(TRAINING, described("j", selected="ml.p4d.24xlarge"))
    assert (chosen.selected, chosen.selected_rank, chosen.fell_back) == (("ml.p4d.24xlarge", 2), 1, True)


def test_a_waits_and_runs_length_is_never_negative_and_counts_from_the_right_moments():
    created, started = NOON, NOON.add(minutes=30)
    processing = {
        "ProcessingJobName": "p",
        "ProcessingJobStatus": "InProgress",
        "CreationTime": created,
        "ProcessingStartTime": started,
        "ProcessingResources": {"ClusterConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}},
    }
    view = JobView.parse(PROCESSING, processing)
    assert view.pending_seconds(NOON.add(hours=5)) == 1800.0
    assert view.run_seconds(NOON.add(hours=1)) == 1800.0
    instant = JobView.parse(PROCESSING, {**processing, "ProcessingStartTime": created})
    assert (instant.pending_seconds(NOON), instant.run_seconds(NOON)) == (0.0, 0.0)
    queued = JobView.parse(PROCESSING, {**processing, "ProcessingStartTime": None})
    assert queued.pending_seconds(NOON.add(minutes=10)) == 600.0, "still waiting: until now"
    assert queued.run_seconds(NOON) is None
    unknown = JobView.parse(PROCESSING, {**processing, "CreationTime": None})
    assert unknown.pending_seconds(NOON) == 0.0
    # A stopped job that never started waited until it ended (its last change), not until whenever it is read.
    stopped = JobView.parse(
        PROCESSING,
        {**processing, "ProcessingStartTime": None, "ProcessingJobStatus": "Stopped", "LastModifiedTime": started},
    )
    assert stopped.pending_seconds(NOON.add(days=3)) == 1800.0
    without_change = JobView.parse(
        PROCESSING, {**processing, "ProcessingStartTime": None, "ProcessingJobStatus": "Stopped"}
    )
    assert without_change.pending_seconds(NOON.add(hours=2)) == 7200.0, "no last change: until now"


def test_a_training_jobs_wait_is_its_pending_periods_and_an_empty_one_is_none():
    transitions = [
        {"Status": "Pending", "StartTime": NOON, "EndTime": NOON},
        {"Status": "Pending", "StartTime": NOON.add(hours=1), "EndTime": NOON.add(hours=1, minutes=20)},
        {"Status": "Training", "StartTime": NOON.add(hours=1, minutes=20)},
    ]
    view = JobView.parse(TRAINING, described("j", SecondaryStatusTransitions=transitions))
    assert view.pending_seconds(NOON.add(days=1)) == 1200.0


def test_the_preferences_are_named_with_their_counts_and_plans():
    with_plan = described("j")
    with_plan["ResourceConfig"]["InstancePreferences"][1]["TrainingPlanArns"] = ["arn:plan"]
    view = JobView.parse(TRAINING, with_plan)
    assert view.describe_preferences() == "#1 ml.p5.48xlarge x1, #2 ml.p4d.24xlarge x2 (training plan)"
