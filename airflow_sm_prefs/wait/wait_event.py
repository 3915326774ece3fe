"""How a wait ended, as one typed value: what the trigger sends and what the task resumes from.

The trigger builds a ``WaitEnded`` and sends its payload; ``execute_complete`` parses the payload once, here, and
nothing after it reads the raw dict. The payload's keys are those 0.1.0 sent, so a trigger that was waiting across
an upgrade still resumes its task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.wait.polling import WaitOutcome


@dataclass(frozen=True)
class WaitEnded:
    outcome: WaitOutcome
    job_name: str
    # The Describe fields the task reads (``JobKind.essentials``), or None when the trigger saw no change
    # since the deferral (a quiet queue): the task then asks SageMaker itself.
    description: Mapping[str, Any] | None
    # The task announced the selection before deferring (it waited for completion).
    announced: bool
    deadline: str | None
    pending_deadline: str | None
    message: str | None = None
    # When the task deferred (ISO 8601), so the resumed task can say how long its wait took; None from triggers
    # of earlier releases.
    deferred_at: str | None = None

    def payload(self, kind: JobKind) -> dict[str, Any]:
        return {
            "status": str(self.outcome),
            "job_name": self.job_name,
            "job_kind": kind.name,
            "description": dict(self.description) if self.description else None,
            "message": self.message,
            "announced": self.announced,
            "deadline": self.deadline,
            "pending_deadline": self.pending_deadline,
            "deferred_at": self.deferred_at,
        }

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> WaitEnded:
        """An event as the triggerer delivers it; a status this version does not know means the job was lost."""
        status = payload.get("status")
        description = payload.get("description")
        return cls(
            outcome=WaitOutcome(status) if status in tuple(WaitOutcome) else WaitOutcome.ERROR,
            job_name=str(payload["job_name"]),
            description=description if isinstance(description, Mapping) and description else None,
            announced=bool(payload.get("announced")),
            deadline=payload.get("deadline"),
            pending_deadline=payload.get("pending_deadline"),
            message=payload.get("message"),
            deferred_at=payload.get("deferred_at") if isinstance(payload.get("deferred_at"), str) else None,
        )

    def view(self, kind: JobKind) -> JobView | None:
        return JobView.parse(kind, self.description) if self.description else None
