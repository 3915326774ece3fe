"""The shapes the Capacity page's JSON route answers (``/capacity/report``): the same rows as
``airflow-sm-prefs report --format json``, declared so that FastAPI checks each answer against them and a row
that gains or loses a field changes a declared contract, not only a dict. TypedDicts (``typing_extensions``'s, which
pydantic needs before Python 3.12): no model library beyond the one FastAPI already validates with.
"""

from __future__ import annotations

from typing_extensions import TypedDict


class FirstChoiceWaitJson(TypedDict):
    """How long the first choice would have taken (``counterfactual.FirstChoiceWaitJson.as_json``)."""

    instance_type: str
    instance_count: int
    basis: str
    p50_seconds: float | None
    p90_seconds: float | None
    restricted_mean_seconds: float
    restricted_to_seconds: float
    observed: int
    censored: int
    longest_seconds: float
    sources: list[str]
    survival: list[tuple[float, float]]


class ConfigurationRow(TypedDict):
    """One configuration a task's jobs got: how they ran and what they cost."""

    instance_type: str
    instance_count: int | None
    rank: int | None
    preference: str
    jobs: int
    run_seconds_p50: float | None
    run_seconds_p90: float | None
    time_to_result_seconds_p50: float | None
    estimated_cost_usd_p50: float | None
    plan_backed: bool
    failed_after_start: int
    hardware_failures: int
    failures_by_cause: dict[str, int]
    utilization: dict[str, dict[str, float | None] | None]
    utilization_jobs: int
    break_even_wait_seconds: float | None
    certified_run_seconds: float | None
    run_time_vs_certified_p50: float | None
    drifted: bool


class ReportRow(TypedDict):
    """One task's row of the capacity report, with its verdict on the fallback."""

    dag_id: str
    task_id: str
    job_kind: str
    runs: int
    recurring: bool
    summary: str
    completed: int
    no_capacity: int
    failed_after_start: int
    stopped: int
    failures_by_cause: dict[str, int]
    fallback_rate: float | None
    rank_counts: dict[str, int]
    pending_seconds_p50: float | None
    pending_seconds_p90: float | None
    first_choice_wait: FirstChoiceWaitJson | None
    break_even_wait_seconds: float | None
    configurations: list[ConfigurationRow]
    verdict: str
    reason: str
