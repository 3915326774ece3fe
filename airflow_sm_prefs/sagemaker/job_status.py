"""What a SageMaker job's status means, said once for the wait, the retry decision, the record and the ledger.

Training and processing jobs share these values (``TrainingJobStatus``, ``ProcessingJobStatus``): InProgress,
Completed, Failed, Stopping, Stopped; a training job can also be Deleting. A training job's ``SecondaryStatus``
says more about a job in progress; only whether it is about to change matters here (it is then looked at more
often).
"""

from __future__ import annotations

IN_PROGRESS = "InProgress"
COMPLETED = "Completed"
FAILED = "Failed"
STOPPING = "Stopping"
STOPPED = "Stopped"
# DeleteTrainingJob accepts only a job that ended; how it ended is no longer told. The wait ends there, as a job
# that did not complete: polling on would end in "job not found", and a retry would start the job again.
DELETING = "Deleting"

ENDED = frozenset({COMPLETED, FAILED, STOPPED, DELETING})
# Secondary statuses a job leaves within seconds to minutes (a queued job's "Pending" can last hours).
_ABOUT_TO_CHANGE = frozenset({"Starting", "Downloading", "Uploading", STOPPING, "Restarting"})


def has_ended(status: str | None) -> bool:
    """The job will not change again: its record can be written and its wait ends."""
    return status in ENDED


def succeeded(status: str | None) -> bool:
    return status == COMPLETED


def failed(status: str | None) -> bool:
    """Ended by an error of the job's own (not stopped): the one end worth showing the job's last lines for."""
    return status == FAILED


def may_still_complete(status: str | None) -> bool:
    """Running or queued: a retry follows the job rather than starting another. A job stopping may not."""
    return status == IN_PROGRESS


def about_to_change(status: str | None, secondary: str | None) -> bool:
    return status == STOPPING or secondary in _ABOUT_TO_CHANGE
