"""``certified=``: the list held to the certification registry's configurations for the task's workload.

``"strict"`` refuses any configuration the registry does not certify: when the DAG file is parsed if the list
is static and the registry local, else just before the create call. ``"warn"`` lets it by with a warning and
records it (``uncertified_preferences``). A registry that cannot be read refuses under ``"strict"`` (no job;
a retry may find the store well) and costs the check with a warning under ``"warn"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from airflow_sm_prefs.preflight import certification, entries
from airflow_sm_prefs.preflight.check import Arguments, Check, Listed, Run
from airflow_sm_prefs.preflight.guardrails import OnViolation
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError


@dataclass(frozen=True)
class CertifiedOnly(Check):
    arguments = ("workload", "certified", "certification_registry")

    certification: certification.Certification

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> CertifiedOnly:
        # Always on: the workload names the record's certified run time even when the check is off.
        return cls(
            certification.Certification.judged(
                given.get("workload"), given.get("certified"), given.get("certification_registry")
            )
        )

    def at_parse(self, kind: JobKind, request: dict[str, Any], on_violation: OnViolation) -> None:
        # A local registry only: a remote one is read just before the job would be created.
        if self.certification.mode == "strict" and self.certification.checked_at_parse:
            self._refuse_uncertified(kind, request)

    def before_create(self, run: Run, listed: Listed) -> Listed:
        if self.certification.mode == "strict":
            self._refuse_uncertified(run.kind, listed.given)
            return listed
        if self.certification.mode == "warn":
            uncertified = self._uncertified(run.kind, listed.given, "warn", run.log)
            for problem in uncertified:
                run.log.warning("Uncertified %s", problem)
            return dataclasses.replace(listed, uncertified=tuple(uncertified))
        return listed

    def _uncertified(
        self, kind: JobKind, request: Mapping[str, Any], if_unreadable: Literal["refuse", "warn"], log: Any = None
    ) -> list[str]:
        """What the registry does not certify. A store that cannot be read refuses the job (``"refuse"``: the
        task fails and may retry; no job), or costs the check with a warning in ``log`` (``"warn"``)."""
        listed = [(e.instance_type, e.count, e.label) for e in entries.entries(kind, request)]
        try:
            return self.certification.uncertified(listed)
        except certification.RegistryError as error:
            raise RequestValidationError([str(error)]) from None
        except certification.RegistryUnreachable as error:
            if if_unreadable == "refuse" or log is None:
                raise certification.RegistryUnreachable(
                    f"{error}; certified='strict' checks the list first, so no SageMaker job was created"
                ) from error
            log.warning("Certification not checked: %s", error)
            return []

    def _refuse_uncertified(self, kind: JobKind, request: Mapping[str, Any]) -> None:
        uncertified = self._uncertified(kind, request, "refuse")
        if uncertified:
            raise RequestValidationError(
                [*uncertified, "certified='strict' lists certified configurations only; no SageMaker job was created"]
            )
