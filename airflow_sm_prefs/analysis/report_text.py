"""The capacity report's rows as a person or another tool reads them: a table, JSON, or CSV, and the words for one
configuration's figures (the Capacity page's task-instance view uses the same)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from airflow_sm_prefs.analysis.report import jobs, median_text

CSV_COLUMNS = (
    "dag_id",
    "task_id",
    "job_kind",
    "runs",
    "recurring",
    "summary",
    "completed",
    "no_capacity",
    "failed_after_start",
    "stopped",
    "fallback_rate",
    "pending_seconds_p50",
    "pending_seconds_p90",
    "verdict",
    "reason",
)


def render(rows: list[dict[str, Any]], output_format: str) -> str:
    if output_format == "json":
        return json.dumps(rows, indent=2)
    if output_format == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow([*CSV_COLUMNS, "rank_counts", "configurations"])
        for row in rows:
            # One cell for the configurations, each as the table says it (a spreadsheet row per task).
            configurations = "; ".join(_configuration_line(c).strip() for c in row["configurations"])
            writer.writerow([*(row[c] for c in CSV_COLUMNS), json.dumps(row["rank_counts"]), configurations])
        return buffer.getvalue()
    return _table(rows)


def _certified_text(configuration: dict[str, Any]) -> str:
    ratio = configuration["run_time_vs_certified_p50"]
    if ratio is None:
        return ""
    drift = " DRIFTED from its benchmark" if configuration["drifted"] else ""
    return f", run p50 x{ratio:.2f} its certified {median_text(configuration['certified_run_seconds'])}{drift}"


def _cost_text(configuration: dict[str, Any]) -> str:
    from airflow_sm_prefs.reference.prices import format_usd

    if configuration["plan_backed"]:
        return "plan-backed"
    return format_usd(configuration["estimated_cost_usd_p50"])


def _wait_text(wait: dict[str, Any]) -> str:
    where = "at the times jobs fell back" if wait["basis"] == "same times" else "on this task's other nights"
    p50 = median_text(wait["p50_seconds"]) if wait["p50_seconds"] is not None else "unknown"
    p90 = median_text(wait["p90_seconds"]) if wait["p90_seconds"] is not None else "unknown"
    return (
        f"first choice's wait {where} ({wait['instance_count']} x {wait['instance_type']}): p50 {p50}, p90 {p90}, "
        f"mean {median_text(wait['restricted_mean_seconds'])} (counting waits up to "
        f"{median_text(wait['restricted_to_seconds'])}); "
        f"{wait['observed']} seen free, {wait['censored']} seen busy; from {', '.join(wait['sources'])}"
    )


def _break_even_column(configuration: dict[str, Any]) -> str:
    seconds = configuration["break_even_wait_seconds"]
    return "" if seconds is None else f", break-even wait {median_text(seconds)}"


def utilization_text(measured: dict[str, Any] | None) -> str:
    """The headline of a configuration's utilization: its GPUs' (else its CPUs'), mean and p90."""
    for name, label in (("gpu", "GPU"), ("cpu", "CPU")):
        figure = (measured or {}).get(name)
        if figure is not None and figure.get("mean") is not None:
            return f"{label} {figure['mean']:.0f}% (p90 {figure['p90']:.0f}%)"
    return "utilization unknown"


UTILIZATION_LABELS = {"gpu": "GPU", "gpu_memory": "GPU memory", "cpu": "CPU", "memory": "memory"}


def utilization_details(measured: dict[str, Any] | None) -> str:
    """Every metric measured: ``GPU 91% (p90 95%), GPU memory 72% (p90 76%), ...``; what was not, left out."""
    said = [
        f"{label} {figure['mean']:.0f}% (p90 {figure['p90']:.0f}%)"
        for name, label in UTILIZATION_LABELS.items()
        if (figure := (measured or {}).get(name)) is not None and figure.get("mean") is not None
    ]
    return ", ".join(said) or "unknown (CloudWatch's instance metrics could not be read; see the task log)"


def _configuration_line(configuration: dict[str, Any]) -> str:
    causes = configuration["failures_by_cause"]
    failed = ", ".join(f"{n} {cause}" for cause, n in causes.items())
    return (
        f"    {configuration['preference']} {configuration['instance_count']} x {configuration['instance_type']}: "
        f"{jobs(configuration['jobs'])}, {utilization_text(configuration['utilization'])}, "
        f"run p50 {median_text(configuration['run_seconds_p50'])}, "
        f"failed {failed or 'never'}, cost p50 {_cost_text(configuration)}"
        f"{_break_even_column(configuration)}{_certified_text(configuration)}"
    )


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No jobs in the capacity ledger for this selection."
    header = f"{'dag / task':<40} {'runs':>5} {'fell back':>9} {'wait p50':>9} {'wait p90':>9}  what happened"
    lines = [header, "-" * len(header)]
    recurring = [row for row in rows if row["recurring"]]
    one_off = [row for row in rows if not row["recurring"]]
    for part, title in ((recurring, None), (one_off, "One-off tasks (one DAG run each):")):
        if part and title and recurring:
            lines.append(title)
        for row in part:
            rate = "-" if row["fallback_rate"] is None else f"{row['fallback_rate']:.0%}"
            lines.append(
                f"{row['dag_id'] + ' / ' + row['task_id']:<40} {row['runs']:>5} {rate:>9} "
                f"{median_text(row['pending_seconds_p50']):>9} {median_text(row['pending_seconds_p90']):>9}  "
                f"{row['summary']}"
            )
            lines.append(f"    verdict {row['verdict']}: {row['reason']}")
            wait = row["first_choice_wait"]
            if wait is not None:
                lines.append(f"    {_wait_text(wait)}")
            lines.extend(_configuration_line(configuration) for configuration in row["configurations"])
    return "\n".join(lines)
