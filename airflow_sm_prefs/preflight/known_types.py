"""Instance types that are typos: refused when the DAG file is parsed, with the type the catalogue has closest.

A type the instance catalogue does not list is refused only when its size (what follows the family:
``24xlage``) is not of the form every SageMaker size takes (``<n>xlarge``, ``xlarge``, ``large``, ``medium``,
...). New families and new sizes keep that form (``ml.p6e-gb200.36xlarge``), so a type newer than the
catalogue passes here, and SageMaker's own model judges it before the create (R19,
``hooks.check_instance_types``); a misspelt family (``ml.p4e.24xlarge``) is left to that check too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from airflow_sm_prefs.preflight import entries
from airflow_sm_prefs.preflight.check import Arguments, Check, Listed, Run
from airflow_sm_prefs.preflight.guardrails import OnViolation
from airflow_sm_prefs.request.jobs import JobKind
from airflow_sm_prefs.request.preferences import RequestValidationError

CLOSE_ENOUGH = 0.8  # difflib's ratio: one or two letters off in a name of fifteen
# The sizes SageMaker's instance types take, as its API model's enums spell them.
SIZE = re.compile(r"(?:\d+)?xlarge|large|medium|small|micro|nano|metal(?:-\d+xl)?")


def misspelt(kind: JobKind, request: Mapping[str, Any]) -> list[str]:
    """One line per entry whose type's size is not one SageMaker sells, with the closest catalogued type."""
    from airflow_sm_prefs.reference import instance_catalogue

    try:
        catalogue = instance_catalogue.current()
    except instance_catalogue.CatalogueError:
        return []  # a team catalogue that cannot be read is the requirements check's to report
    problems = []
    for entry in entries.entries(kind, request):
        name = entry.instance_type
        size = name.rpartition(".")[2]
        if name in catalogue or SIZE.fullmatch(size):
            continue
        closest = difflib.get_close_matches(name, list(catalogue), n=1, cutoff=CLOSE_ENOUGH)
        meant = f"; did you mean {closest[0]}?" if closest else ""
        problems.append(
            f"preference #{entry.rank + 1} ({name}): not an instance type, {size!r} is not a size SageMaker "
            f"sells{meant} [R19]"
        )
    return problems


class KnownInstanceTypes(Check):
    """Always on: a typo in a type fails the DAG import, not the run ten minutes later."""

    @classmethod
    def from_arguments(cls, kind: JobKind, given: Arguments) -> KnownInstanceTypes:
        return cls()

    def at_parse(self, kind: JobKind, request: dict[str, Any], on_violation: OnViolation) -> None:
        problems = misspelt(kind, request)
        if problems:
            raise RequestValidationError(problems)

    def before_create(self, run: Run, listed: Listed) -> Listed:
        problems = misspelt(run.kind, listed.given)
        if problems:
            raise RequestValidationError(problems)
        return listed
