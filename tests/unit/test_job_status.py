"""The one statement of what a job's status means (job_status), for every status SageMaker reports."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.sagemaker import job_status

# status: (ended, succeeded, failed, may still complete)
MEANINGS = {
    "InProgress": (False, False, False, True),
    "Completed": (True, True, False, False),
    "Failed": (True, False, True, False),
    "Stopping": (False, False, False, False),  # on its way out: a retry never follows it
    "Stopped": (True, False, False, False),
    "Deleting": (True, False, False, False),  # a training job deleted after it ended, however it ended
    None: (False, False, False, False),  # not known (a job never created)
}


@pytest.mark.parametrize("status", list(MEANINGS))
def test_each_status_means_one_thing(status):
    assert (
        job_status.has_ended(status),
        job_status.succeeded(status),
        job_status.failed(status),
        job_status.may_still_complete(status),
    ) == MEANINGS[status]


def test_the_statuses_are_sagemakers_own_for_both_kinds():
    from botocore.session import get_session

    model = get_session().get_service_model("sagemaker")
    assert set(model.shape_for("TrainingJobStatus").enum) == set(MEANINGS) - {None}
    assert set(model.shape_for("ProcessingJobStatus").enum) == set(MEANINGS) - {None, "Deleting"}


@pytest.mark.parametrize(
    ("status", "secondary", "soon"),
    [
        ("InProgress", "Starting", True),
        ("InProgress", "Downloading", True),
        ("InProgress", "Uploading", True),
        ("InProgress", "Restarting", True),
        ("InProgress", "Stopping", True),
        ("Stopping", None, True),
        ("InProgress", "Pending", False),  # queued for capacity: may last hours
        ("InProgress", "Training", False),
        ("InProgress", None, False),  # a processing job says no more
        ("Completed", "Completed", False),
    ],
)
def test_a_job_about_to_change_is_known_by_its_status_or_secondary_status(status, secondary, soon):
    assert job_status.about_to_change(status, secondary) is soon
