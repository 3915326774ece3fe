"""The Capacity page: the capacity report in the Airflow UI, served by the API server (a plugin FastAPI app).

Every route authenticates the caller the way Airflow's own API does (the session cookie or a bearer token)
and shows only the DAGs the auth manager lets that user read: plugin apps get no authentication from
Airflow by default, so each route asks for it here. Pages are plain HTML with SVG charts, no scripts.
"""

from __future__ import annotations

import datetime as dt
import html
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import pendulum
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, RedirectResponse

from airflow_sm_prefs.evidence import ledger, report
from airflow_sm_prefs.storage.object_storage import StorageUnavailable
from airflow_sm_prefs.surface.capacity_views import Answer, Views, store_problem

COMPUTING_RELOAD_SECONDS = 3
RANK_COLOURS = ("#2563eb", "#f59e0b", "#dc2626", "#7c3aed", "#059669")
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5rem;color:#111}table{border-collapse:collapse;margin:1rem 0}"
    "th,td{border-bottom:1px solid #ddd;padding:.35rem .7rem;text-align:left;vertical-align:top}"
    "th{background:#f4f4f5}.paid_off{color:#047857}.did_not_pay_off,.incompatible_fallback{color:#b91c1c}"
    ".not_enough_data{color:#6b7280}.pending{background:#fef9c3;padding:.4rem .7rem}h2{margin-top:2rem}"
    "svg{background:#fafafa;border:1px solid #e4e4e7}"
)


def _user_dependency() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


class DagAccess:
    """Airflow's own access checks (``requires_access_dag``), made once per app: ``listing`` lets in a user who
    may read some DAG (Airflow's rule for its own list routes; the rows are then those of ``readable_dags``);
    ``task_instances`` a user who may read the task instances of the DAG named in the route's path (Airflow 3.1
    reads the DAG id from the path only)."""

    def __init__(self) -> None:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import requires_access_dag

        self.listing = requires_access_dag("GET")
        self.task_instances = requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE)


def readable_dags(user: Any) -> set[str]:
    """The DAG ids this user may read, as the auth manager says."""
    from airflow.api_fastapi.app import get_auth_manager

    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))


_VIEWS = Views()


def _reading_for(user: Any) -> tuple[ledger.Reading, frozenset[str]]:
    """The ledger entries of the DAGs this user may read (with the count of those that could not be read)."""
    dags = readable_dags(user)
    return _unless_the_store_fails(lambda: _VIEWS.reading(dags)), frozenset(dags)


def _unless_the_store_fails(read: Callable[[], ledger.Reading]) -> ledger.Reading:
    """``read()``; a store that fails to answer is a 503 saying so in one line, not a server error."""
    try:
        return read()
    except Exception as error:
        problem = store_problem(error)
        if problem is None:
            raise
        raise HTTPException(status_code=503, detail=problem) from None


def _since(days: int | None) -> pendulum.DateTime | None:
    """The window's start, to the minute: a page asked for again within the minute is the same view."""
    return pendulum.now("UTC").subtract(days=days).start_of("minute") if days else None


def create_app() -> FastAPI:
    app = FastAPI(title="SageMaker capacity", docs_url=None, redoc_url=None, openapi_url=None)
    user_dependency = _user_dependency()
    access = app.state.dag_access = DagAccess()
    listing = [Depends(access.listing)]

    @app.exception_handler(StorageUnavailable)
    def ledger_unavailable(request: Any, error: StorageUnavailable) -> HTMLResponse:
        # Authentication ran before the ledger was opened: only a signed-in user reads which setting is wrong.
        body = f"<p>The capacity ledger cannot be opened: {html.escape(str(error))}</p>"
        return HTMLResponse(_page("SageMaker capacity", body), status_code=503)

    @app.get("/capacity", response_class=HTMLResponse, dependencies=listing)
    def capacity(user: Any = user_dependency, days: int | None = Query(None, ge=1, le=3650)) -> str:
        dags, since = frozenset(readable_dags(user)), _since(days)

        def page() -> str:
            reading = _VIEWS.reading(dags)

            def body() -> str:
                rows = report.summarize(reading.entries, since=since)
                bad = reading.bad
                skipped = f"<p>{bad} ledger entries could not be read and were skipped.</p>" if bad else ""
                weather_link = (
                    "<p><a href='capacity/weather'>Capacity weather</a>: how often each configuration had room. "
                    "<a href='capacity/plans'>Training plans</a>: would one pay, and what each bought.</p>"
                )
                return skipped + weather_link + _capacity_body(rows, reading.entries)

            return _VIEWS.view(reading, ("page", dags, since), body)

        return _answered("SageMaker capacity", _VIEWS.latest(("page", dags, days), page))

    @app.get("/capacity/weather", response_class=HTMLResponse, dependencies=listing)
    def capacity_weather(user: Any = user_dependency, days: int | None = Query(None, ge=1, le=3650)) -> str:
        from airflow_sm_prefs.evidence.weather import weather

        dags, since = frozenset(readable_dags(user)), _since(days)

        def page() -> str:
            reading = _VIEWS.reading(dags)

            def body() -> str:
                recent = [entry for entry in reading.entries if report.created_since(entry, since)]
                return _weather_section(weather(recent))

            return _VIEWS.view(reading, ("weather", dags, since), body)

        return _answered("SageMaker capacity weather", _VIEWS.latest(("weather", dags, days), page))

    @app.get("/capacity/plans", response_class=HTMLResponse, dependencies=listing)
    def capacity_plans(user: Any = user_dependency) -> str:
        from airflow_sm_prefs.surface import plans_page

        dags = frozenset(readable_dags(user))

        def page() -> str:  # the snapshots change apart from the ledger: computed afresh, never a kept view
            return plans_page.body(_VIEWS.reading(dags).entries, dags)

        return _answered("SageMaker training plans", _VIEWS.latest(("plans", dags), page))

    @app.get("/capacity/report", dependencies=listing)
    def capacity_report(
        user: Any = user_dependency,
        dag_id: str | None = None,
        task_id: str | None = None,
        days: int | None = Query(None, ge=1, le=3650),
    ) -> list[dict[str, Any]]:
        reading, dags = _reading_for(user)
        since = _since(days)
        return _VIEWS.view(
            reading,
            ("report", dags, since, dag_id, task_id),
            lambda: report.summarize(reading.entries, since=since, dag_id=dag_id, task_id=task_id),
        )

    @app.get("/capacity/task-instance", response_class=RedirectResponse, status_code=307)
    def task_instance_by_query(
        dag_id: str, run_id: str, task_id: str, map_index: int = -1, user: Any = user_dependency
    ) -> str:
        """The address links made before the DAG id moved into the path: sent on to where Airflow's check of
        that DAG applies on every Airflow line."""
        query = urllib.parse.urlencode({"run_id": run_id, "task_id": task_id, "map_index": map_index})
        return f"dags/{urllib.parse.quote(dag_id, safe='')}/task-instance?{query}"

    @app.get(
        "/capacity/dags/{dag_id}/task-instance",
        response_class=HTMLResponse,
        dependencies=[Depends(access.task_instances)],
    )
    def task_instance(dag_id: str, run_id: str, task_id: str, map_index: int = -1, user: Any = user_dependency) -> str:
        from airflow_sm_prefs.evidence.advisor import advise
        from airflow_sm_prefs.evidence.counterfactual import Timeline

        own = _unless_the_store_fails(lambda: ledger.read(dag_id=dag_id, memo=_VIEWS.memo))
        history = [e for e in own.entries if e["task_id"] == task_id]
        this = next((e for e in history if e["run_id"] == run_id and e["map_index"] == map_index), None)
        evidence, dags = _reading_for(user)  # the advice may draw on every DAG this user may read
        advice = (
            _VIEWS.view(
                evidence, ("advice", dags, dag_id, task_id), lambda: advise(history, Timeline(evidence.entries))
            )
            if history
            else None
        )
        return _page(f"{dag_id} / {task_id}", _task_instance_body(this, history) + _advice_section(advice))

    return app


# -- HTML ------------------------------------------------------------------------------------------------------


def _page(title: str, body: str, reload_after: int | None = None) -> str:
    reload = f"<meta http-equiv='refresh' content='{reload_after}'>" if reload_after else ""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{reload}<title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _answered(title: str, answer: Answer[str]) -> str:
    """The page as computed now, or the last one with when it was computed, or a page that reloads until the
    first one is ready."""
    if answer.store_problem is not None:
        since = _utc(answer.store_failing_since or 0.0)
        failing = f"<p class='pending'>Since {since}, {html.escape(answer.store_problem)}."
        if answer.value is None:
            return _page(title, f"{failing} No page could be computed yet; this page reloads itself.</p>",
                         reload_after=COMPUTING_RELOAD_SECONDS)  # fmt: skip
        shown = f" Shown: the page as computed at {_utc(answer.computed_at or 0.0)}.</p>"
        return _page(title, failing + shown + answer.value)
    if answer.value is None:
        note = "<p class='pending'>The report is being computed over the capacity ledger; this page reloads itself.</p>"
        return _page(title, note, reload_after=COMPUTING_RELOAD_SECONDS)
    if answer.computed_at is None:
        return _page(title, answer.value)
    note = (
        f"<p class='pending'>As computed at {_utc(answer.computed_at)}: jobs have ended since, and the page is being "
        "brought up to date. Reload in a few seconds for the newer one.</p>"
    )
    return _page(title, note + answer.value)


def _utc(epoch_seconds: float) -> str:
    return dt.datetime.fromtimestamp(epoch_seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _seconds(value: float | None) -> str:
    from airflow_sm_prefs.platform.formatting import format_seconds

    return "unknown" if value is None else format_seconds(value)


def _capacity_body(rows: list[dict[str, Any]], entries: list[ledger.LedgerEntry]) -> str:
    if not rows:
        return "<p>No SageMaker jobs in the capacity ledger for the DAGs you may read.</p>"
    parts = [
        "<table><tr><th>DAG / task</th><th>runs</th><th>completed</th><th>no capacity</th><th>failed after start</th>"
        "<th>fell back</th><th>jobs per rank</th><th>wait p50 / p90</th><th>verdict</th></tr>"
    ]
    for row in rows:
        rate = "-" if row["fallback_rate"] is None else f"{row['fallback_rate']:.0%}"
        ranks = ", ".join(f"#{int(rank) + 1}: {n}" for rank, n in row["rank_counts"].items()) or "-"
        parts.append(
            f"<tr><td>{html.escape(row['dag_id'])} / {html.escape(row['task_id'])}</td><td>{row['runs']}</td>"
            f"<td>{row['completed']}</td><td>{row['no_capacity']}</td><td>{row['failed_after_start']}</td>"
            f"<td>{rate}</td><td>{ranks}</td><td>{_seconds(row['pending_seconds_p50'])} / "
            f"{_seconds(row['pending_seconds_p90'])}</td><td class='{row['verdict']}'><b>{row['verdict']}</b>: "
            f"{html.escape(row['reason'])}</td></tr>"
        )
    parts.append("</table>")
    by_task: dict[tuple[str, str], list[ledger.LedgerEntry]] = defaultdict(list)
    for entry in entries:
        by_task[(entry["dag_id"], entry["task_id"])].append(entry)
    for row in rows:
        mine = by_task[(row["dag_id"], row["task_id"])]
        parts.append(f"<h2>{html.escape(row['dag_id'])} / {html.escape(row['task_id'])}</h2>")
        parts.append(_wait_chart(mine))
        parts.append(_survival_chart(row["first_choice_wait"], row["break_even_wait_seconds"]))
        parts.append(
            _configuration_chart(
                row["configurations"], "run_seconds_p50", "Median run time per configuration", _seconds
            )
        )
        parts.append(
            _configuration_chart(
                row["configurations"], "estimated_cost_usd_p50", "Median estimated cost per job, by configuration", _usd
            )
        )
    return "".join(parts)


def _task_instance_body(this: ledger.LedgerEntry | None, history: list[ledger.LedgerEntry]) -> str:
    if this is None:
        return "<p>This task instance has no ended SageMaker job in the capacity ledger (yet).</p>"
    waits = sorted(float(e["pending_seconds"]) for e in history)
    below = sum(1 for wait in waits if wait < float(this["pending_seconds"]))
    preferences = "".join(
        f"<li{' style=font-weight:bold' if i == this['selected_rank'] else ''}>"
        f"{html.escape(str(p.get('InstanceType')))} x {html.escape(str(p.get('InstanceCount', 'job count')))}"
        f"{' (chosen)' if i == this['selected_rank'] else ''}</li>"
        for i, p in enumerate(this["preferences"])
    )
    return (
        f"<p>Job <code>{html.escape(this['job_name'])}</code> ended <b>{this['outcome']}</b>.</p>"
        f"<ol>{preferences}</ol><table>"
        f"<tr><th>waited</th><td>{_seconds(this['pending_seconds'])} (longer than {below} of this task's "
        f"{len(waits)} jobs; median {_seconds(report.percentile(waits, 0.5))})</td></tr>"
        f"<tr><th>ran</th><td>{_seconds(this['run_seconds'])}</td></tr>"
        f"<tr><th>estimated cost</th><td>{_cost_cell(this)}</td></tr></table>" + _wait_chart(history)
    )


def _advice_section(advice: dict[str, Any] | None) -> str:
    if advice is None or not advice["candidates"]:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(row['candidate'])}{' <b>(better)</b>' if row['better_than_current'] else ''}</td>"
        f"<td>{_seconds(row['time_to_result_p50_seconds'])}</td><td>{_seconds(row['time_to_result_p90_seconds'])}</td>"
        f"<td>{_usd(row['estimated_cost_usd_p50'])}</td><td>{row['nights_with_a_result']} of {row['nights']} nights "
        f"with a result, {row['nights_waiting_past_the_evidence']} waiting past the evidence</td></tr>"
        for row in advice["candidates"]
    )
    return (
        "<h2>Advice</h2><p>Each list replayed on this task's nights, with what every job you may read saw of each "
        "configuration then (<code>airflow-sm-prefs advise</code>).</p><table><tr><th>list</th>"
        f"<th>time to result p50</th><th>p90</th><th>cost p50</th><th>evidence</th></tr>{rows}</table>"
    )


def _share_colour(share: float) -> str:
    """From red (no job got it within 15 minutes) through amber to green (every job did)."""
    low, middle, high = (185, 28, 28), (245, 158, 11), (4, 120, 87)
    start, end, t = (low, middle, share * 2) if share < 0.5 else (middle, high, share * 2 - 1)
    red, green, blue = (round(a + (b - a) * t) for a, b in zip(start, end, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"


def _weather_section(rows: list[dict[str, Any]]) -> str:
    from airflow_sm_prefs.evidence.weather import DAYS

    if not rows:
        return "<p>No job in the capacity ledger for the DAGs you may read listed a configuration with a count.</p>"
    parts = [
        "<p>Share of jobs that got each configuration within 15 minutes, by UTC hour of "
        "the week (<code>airflow-sm-prefs weather</code>); grey: no job then. Hover a cell for its numbers.</p>"
    ]
    size, left, top = 18, 40, 18
    for row in rows:
        cells = []
        for cell in row["cells"]:
            x = left + cell["hour"] * size
            y = top + (cell["hour_of_week"] // 24) * size
            wait = _seconds(cell["median_wait_seconds"])
            title = (
                f"{cell['day']} {cell['hour']:02d}:00 UTC: {cell['got_it_within_15m_share']:.0%} of "
                f"{_jobs(cell['jobs'])} within 15 minutes, median wait {wait}"
            )
            cells.append(
                f"<rect x='{x}' y='{y}' width='{size - 2}' height='{size - 2}' "
                f"fill='{_share_colour(cell['got_it_within_15m_share'])}'><title>{html.escape(title)}</title></rect>"
            )
        grid = "".join(
            f"<rect x='{left + h * size}' y='{top + d * size}' width='{size - 2}' height='{size - 2}' fill='#e4e4e7'/>"
            for d in range(7)
            for h in range(24)
        )
        labels = "".join(
            f"<text x='4' y='{top + d * size + 13}' font-size='11'>{day}</text>" for d, day in enumerate(DAYS)
        )
        hours = "".join(f"<text x='{left + h * size}' y='12' font-size='10'>{h}</text>" for h in range(0, 24, 3))
        width, height = left + 24 * size + 10, top + 7 * size + 6
        caption = f"{row['region']}: {row['instance_count']} x {row['instance_type']} ({_jobs(row['jobs'])})"
        parts.append(
            f"<figure><figcaption>{html.escape(caption)}</figcaption><svg role='img' aria-label='capacity weather' "
            f"width='{width}' height='{height}' viewBox='0 0 {width} {height}'>{hours}{labels}{grid}{''.join(cells)}"
            "</svg></figure>"
        )
    return "".join(parts)


# -- charts (SVG) ------------------------------------------------------------------------------------------------


def _wait_chart(entries: Iterable[ledger.LedgerEntry], width: int = 640, height: int = 220) -> str:
    points = [
        # The ledger's reader admitted only ISO 8601 times with a zone; datetime parses them many times faster.
        (dt.datetime.fromisoformat(e["created_at"]).timestamp(), float(e["pending_seconds"]), e["selected_rank"])
        for e in entries
        if e["created_at"]
    ]
    if not points:
        return ""
    left, bottom = 60, 30
    x_low, x_high = min(p[0] for p in points), max(p[0] for p in points)
    y_high = max(max(p[1] for p in points), 1.0)
    span = max(x_high - x_low, 1.0)
    marks = []
    for at, wait, rank in points:
        x = left + (at - x_low) / span * (width - left - 20)
        y = height - bottom - wait / y_high * (height - bottom - 20)
        colour = RANK_COLOURS[rank % len(RANK_COLOURS)] if rank is not None else "#111"
        label = "no capacity" if rank is None else f"#{rank + 1}"
        marks.append(
            f"<circle cx='{x:.1f}' cy='{y:.1f}' r='5' fill='{colour}'><title>{label}: {_seconds(wait)}</title></circle>"
        )
    legend = "".join(
        f"<text x='{left + 70 * i}' y='14' fill='{colour}' font-size='12'>● #{i + 1}</text>"
        for i, colour in enumerate(RANK_COLOURS[:3])
    )
    return (
        f"<figure><figcaption>Wait for capacity by chosen rank, over time (max {_seconds(y_high)})</figcaption>"
        f"<svg role='img' width='{width}' height='{height}' viewBox='0 0 {width} {height}'>{legend}"
        f"<line x1='{left}' y1='{height - bottom}' x2='{width - 10}' y2='{height - bottom}' stroke='#999'/>"
        f"<line x1='{left}' y1='20' x2='{left}' y2='{height - bottom}' stroke='#999'/>"
        f"<text x='4' y='{height - bottom}' font-size='11'>0 s</text>"
        f"<text x='4' y='26' font-size='11'>{_seconds(y_high)}</text>{''.join(marks)}</svg></figure>"
    )


def _survival_chart(wait: dict[str, Any] | None, break_even: float | None, width: int = 640, height: int = 220) -> str:
    """The share of jobs the first choice would still have kept waiting, against time: a step line, with the
    break-even wait marked (the fallback pays off where the line is above one half there)."""
    if wait is None or not (wait["observed"] or wait["censored"]):
        return ""
    left, bottom, top = 60, 30, 20
    horizon = max(float(wait["longest_seconds"]), break_even or 0.0, 1.0) * 1.05
    plot_width, plot_height = width - left - 20, height - bottom - top

    def x(seconds: float) -> float:
        return left + seconds / horizon * plot_width

    def y(share: float) -> float:
        return top + (1.0 - share) * plot_height

    path = [f"M{x(0):.1f},{y(1.0):.1f}"]
    remaining = 1.0
    for at, after in wait["survival"]:
        path.append(f"H{x(at):.1f}V{y(after):.1f}")
        remaining = after
    path.append(f"H{x(wait['longest_seconds']):.1f}")
    marks = ""
    if break_even is not None:
        marks = (
            f"<line x1='{x(break_even):.1f}' y1='{top}' x2='{x(break_even):.1f}' y2='{height - bottom}' "
            f"stroke='#b91c1c' stroke-dasharray='4 3'/><text x='{x(break_even) + 4:.1f}' y='{top + 12}' "
            f"font-size='11' fill='#b91c1c'>break-even {_seconds(break_even)}</text>"
        )
    where = "at the times jobs fell back" if wait["basis"] == "same times" else "on this task's other nights"
    caption = (
        f"Share of jobs the first choice ({wait['instance_count']} x {wait['instance_type']}) would still have kept "
        f"waiting, {where}: {wait['observed']} seen free, {wait['censored']} seen busy; p50 "
        f"{_seconds(wait['p50_seconds'])}, ends at {remaining:.0%} after {_seconds(wait['longest_seconds'])}"
    )
    return (
        f"<figure><figcaption>{html.escape(caption)}</figcaption>"
        f"<svg role='img' aria-label='first-choice wait survival' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>"
        f"<line x1='{left}' y1='{height - bottom}' x2='{width - 10}' y2='{height - bottom}' stroke='#999'/>"
        f"<line x1='{left}' y1='{top}' x2='{left}' y2='{height - bottom}' stroke='#999'/>"
        f"<line x1='{left}' y1='{y(0.5):.1f}' x2='{width - 20}' y2='{y(0.5):.1f}' stroke='#ddd'/>"
        f"<text x='4' y='{top + 4}' font-size='11'>100%</text>"
        f"<text x='4' y='{y(0.5) + 4:.1f}' font-size='11'>50%</text>"
        f"<text x='4' y='{height - bottom}' font-size='11'>0%</text>"
        f"<text x='{width - 90}' y='{height - 8}' font-size='11'>{_seconds(horizon)}</text>"
        f"<path d='{''.join(path)}' fill='none' stroke='{RANK_COLOURS[0]}' stroke-width='2'/>{marks}</svg></figure>"
    )


def _usd(value: float | None) -> str:
    from airflow_sm_prefs.reference.prices import format_usd

    return format_usd(value)


def _cost_cell(entry: ledger.LedgerEntry) -> str:
    basis = entry.get("cost_basis")
    if basis == "plan-backed":
        return "plan-backed (paid by the training plan, not priced on demand)"
    if entry.get("estimated_cost_usd") is None:
        return "unknown (no price for this type and Region in the price table)"
    return f"{_usd(entry['estimated_cost_usd'])} at on-demand prices"


def _benchmark(configuration: dict[str, Any], key: str) -> str:
    """How the median run compares with the configuration's certified run time, on the run-time chart."""
    ratio = configuration.get("run_time_vs_certified_p50")
    if key != "run_seconds_p50" or ratio is None:
        return ""
    return f", x{ratio:.2f} its benchmark" + (" - DRIFTED" if configuration.get("drifted") else "")


def _configuration_chart(
    configurations: list[dict[str, Any]], key: str, caption: str, show: Callable[[Any], str], width: int = 640
) -> str:
    measured = [c for c in configurations if c[key] is not None]
    if not measured:
        return f"<p>{html.escape(caption)}: unknown.</p>" if key == "estimated_cost_usd_p50" else ""
    bar_height, left = 26, 230
    height = bar_height * len(measured) + 30
    longest = max(c[key] for c in measured) or 1.0
    bars = []
    for index, configuration in enumerate(measured):
        y = 20 + index * bar_height
        length = configuration[key] / longest * (width - left - 210)
        colour = RANK_COLOURS[(configuration["rank"] or 0) % len(RANK_COLOURS)]
        label = (
            f"#{(configuration['rank'] or 0) + 1} {configuration['instance_count']} x {configuration['instance_type']}"
        )
        bars.append(
            f"<text x='4' y='{y + 16}' font-size='12'>{html.escape(label)}</text>"
            f"<rect x='{left}' y='{y + 4}' width='{length:.1f}' height='{bar_height - 8}' fill='{colour}'/>"
            f"<text x='{left + length + 6:.1f}' y='{y + 16}' font-size='12'>"
            f"{show(configuration[key])} ({_jobs(configuration['jobs'])}{_benchmark(configuration, key)})</text>"
        )
    return (
        f"<figure><figcaption>{html.escape(caption)}</figcaption>"
        f"<svg role='img' width='{width}' height='{height}' viewBox='0 0 {width} {height}'>{''.join(bars)}</svg>"
        "</figure>"
    )
