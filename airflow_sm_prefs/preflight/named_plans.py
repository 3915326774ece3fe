"""Training plans written into a list by hand, checked just before the create call (training only).

An entry naming a plan that can no longer take the job (expired, failed, full, not Active before the job
would stop waiting, too small, or not found in the account and Region) is a violation like any guardrail's:
``on_violation="fail"`` refuses the task, ``"drop"`` removes the entry and records why. SageMaker itself would
only skip such an entry, silently, and the team would pay on-demand prices for a plan it bought. A plan that
cannot be read costs the check with one warning, never the task.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.preflight.check import Arguments, EntryCheck, Run
from airflow_sm_prefs.preflight.entries import entries
from airflow_sm_prefs.preflight.plans_first import PlansReader, unusable
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.pending_limit import pending_limit


@dataclass(frozen=True)
class NamedPlansUsable(EntryCheck):
    """Each entry naming a plan that cannot take the job, with why; always on for a kind whose entries may
    name plans."""

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> NamedPlansUsable | None:
        return cls() if kind.takes_training_plans else None

    def violations(self, run: Run, request: Mapping[str, Any]) -> dict[int, str]:
        found: dict[int, str] = {}
        reader = PlansReader(run.account.plans_client, run.log)
        now = dt.datetime.now(dt.UTC)
        pending = pending_limit(run.kind, request, start=now, max_pending=None, until=None).wait.total_seconds()
        for entry in entries(run.kind, request):
            for arn in entry.api.get("TrainingPlanArns") or []:
                known, plan = reader.named(str(arn))
                if not known:
                    return found  # SageMaker cannot be asked: it still skips a plan that cannot take the job
                if plan is None:
                    found[entry.rank] = f"{entry.label}: training plan {arn} does not exist in this account and Region"
                    continue
                reason = unusable(plan, entry, now, pending)
                if reason is not None:
                    found[entry.rank] = f"{entry.label}: training plan {plan.name} {reason}"
        return found
