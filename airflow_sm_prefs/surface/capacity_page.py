"""The Capacity page: the capacity report in the Airflow UI, served by the API server (a plugin FastAPI app).

Every route authenticates the caller the way Airflow's own API does (the session cookie or a bearer token)
and shows only the DAGs the auth manager lets that user read: plugin apps get no authentication from
Airflow by default, so each route asks for it here. Pages are plain HTML with SVG charts, no scripts.
"""

from __future__ import annotations

import urllib.parse
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pendulum
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, RedirectResponse

from airflow_sm_prefs.analysis import report, report_text
from airflow_sm_prefs.evidence import ledger_entry, ledger_reading
from airflow_sm_prefs.storage.object_storage import StorageUnavailable
from airflow_sm_prefs.surface.capacity_models import ReportRow
from airflow_sm_prefs.surface.capacity_views import Answer, Views, store_problem
from airflow_sm_prefs.surface.page_templates import render, utc

COMPUTING_RELOAD_SECONDS = 3
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


def _reading_for(user: Any) -> tuple[ledger_reading.Reading, frozenset[str]]:
    """The ledger entries of the DAGs this user may read (with the count of those that could not be read)."""
    dags = readable_dags(user)
    return _unless_the_store_fails(lambda: _VIEWS.reading(dags)), frozenset(dags)


def _unless_the_store_fails(read: Callable[[], ledger_reading.Reading]) -> ledger_reading.Reading:
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
        body = render("message.html", message=f"The capacity ledger cannot be opened: {error}")
        return HTMLResponse(_page("SageMaker capacity", body), status_code=503)

    @app.get("/capacity", response_class=HTMLResponse, dependencies=listing)
    def capacity(user: Any = user_dependency, days: int | None = Query(None, ge=1, le=3650)) -> str:
        dags, since = frozenset(readable_dags(user)), _since(days)

        def page() -> str:
            reading = _VIEWS.reading(dags)

            def body() -> str:
                return _capacity_body(report.summarize(reading.entries, since=since), reading.entries, reading.bad)

            return _VIEWS.view(reading, ("page", dags, since), body)

        return _answered("SageMaker capacity", _VIEWS.latest(("page", dags, days), page))

    @app.get("/capacity/weather", response_class=HTMLResponse, dependencies=listing)
    def capacity_weather(user: Any = user_dependency, days: int | None = Query(None, ge=1, le=3650)) -> str:
        from airflow_sm_prefs.analysis.weather import weather

        dags, since = frozenset(readable_dags(user)), _since(days)

        def page() -> str:
            reading = _VIEWS.reading(dags)

            def body() -> str:
                recent = [entry for entry in reading.entries if report.created_since(entry, since)]
                return _weather_body(weather(recent))

            return _VIEWS.view(reading, ("weather", dags, since), body)

        return _answered("SageMaker capacity weather", _VIEWS.latest(("weather", dags, days), page))

    @app.get("/capacity/plans", response_class=HTMLResponse, dependencies=listing)
    def capacity_plans(user: Any = user_dependency) -> str:
        from airflow_sm_prefs.surface import plans_page

        dags = frozenset(readable_dags(user))

        def page() -> str:  # the snapshots change apart from the ledger: computed afresh, never a kept view
            return plans_page.body(_VIEWS.reading(dags).entries, dags)

        return _answered("SageMaker training plans", _VIEWS.latest(("plans", dags), page))

    @app.get("/capacity/report", dependencies=listing, response_model=list[ReportRow])
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
        dag_id: str, run_id: str, task_id: str, map_index: str = "-1", user: Any = user_dependency
    ) -> str:
        """The address links made before the DAG id moved into the path: sent on to where Airflow's check of
        that DAG applies on every Airflow line."""
        query = urllib.parse.urlencode({"run_id": run_id, "task_id": task_id, "map_index": _map_index(map_index)})
        return f"dags/{urllib.parse.quote(dag_id, safe='')}/task-instance?{query}"

    @app.get(
        "/capacity/dags/{dag_id}/task-instance",
        response_class=HTMLResponse,
        dependencies=[Depends(access.task_instances)],
    )
    def task_instance(
        dag_id: str, run_id: str, task_id: str, map_index: str = "-1", user: Any = user_dependency
    ) -> str:
        from airflow_sm_prefs.analysis.advisor import advise
        from airflow_sm_prefs.analysis.counterfactual import Timeline

        index = _map_index(map_index)
        own = _unless_the_store_fails(lambda: ledger_reading.read(dag_id=dag_id, memo=_VIEWS.memo))
        history = [e for e in own.entries if e["task_id"] == task_id]
        run = _run_id(run_id)
        this = next((e for e in history if e["run_id"] == run and e["map_index"] == index), None)
        evidence, dags = _reading_for(user)  # the advice may draw on every DAG this user may read
        advice = (
            _VIEWS.view(
                evidence, ("advice", dags, dag_id, task_id), lambda: advise(history, Timeline(evidence.entries))
            )
            if history
            else None
        )
        title = f"{dag_id} / {task_id}" + (f" [{index}]" if index >= 0 else "")  # a mapped task's, as Airflow shows it
        return _page(title, _task_instance_body(this, history, advice))

    return app


# -- HTML (templates/, charts.py) ---------------------------------------------------------------------------


def _page(title: str, body: str, reload_after: int | None = None, notice: str | None = None) -> str:
    return render("page.html", title=title, style=STYLE, body=body, reload_after=reload_after, notice=notice)


def _answered(title: str, answer: Answer[str]) -> str:
    """The page as computed now, or the last one with when it was computed, or a page that reloads until the
    first one is ready."""
    if answer.store_problem is not None:
        failing = f"Since {utc(answer.store_failing_since or 0.0)}, {answer.store_problem}."
        if answer.value is None:
            notice = f"{failing} No page could be computed yet; this page reloads itself."
            return _page(title, "", reload_after=COMPUTING_RELOAD_SECONDS, notice=notice)
        shown = f"Shown: the page as computed at {utc(answer.computed_at or 0.0)}."
        return _page(title, answer.value, notice=f"{failing} {shown}")
    if answer.value is None:
        notice = "The report is being computed over the capacity ledger; this page reloads itself."
        return _page(title, "", reload_after=COMPUTING_RELOAD_SECONDS, notice=notice)
    if answer.computed_at is None:
        return _page(title, answer.value)
    notice = (
        f"As computed at {utc(answer.computed_at)}: jobs have ended since, and the page is being brought up to "
        "date. Reload in a few seconds for the newer one."
    )
    return _page(title, answer.value, notice=notice)


def _capacity_body(rows: list[dict[str, Any]], entries: list[ledger_entry.LedgerEntry], bad: int) -> str:
    from airflow_sm_prefs.reference.prices import format_usd
    from airflow_sm_prefs.surface import charts

    by_task: dict[tuple[str, str], list[ledger_entry.LedgerEntry]] = defaultdict(list)
    for entry in entries:
        by_task[(entry["dag_id"], entry["task_id"])].append(entry)
    costs_caption = "Median estimated cost per job, by configuration"
    tasks = [
        {
            "row": row,
            "fell_back": "-" if row["fallback_rate"] is None else f"{row['fallback_rate']:.0%}",
            "ranks": ", ".join(f"{rank}: {n}" for rank, n in row["rank_counts"].items()) or "-",
            "waits": charts.wait_chart(by_task[(row["dag_id"], row["task_id"])]),
            "survival": charts.survival_chart(row["first_choice_wait"], row["break_even_wait_seconds"]),
            "run_times": charts.configuration_chart(
                row["configurations"], "run_seconds_p50", "Median run time per configuration", charts.seconds
            ),
            "costs": charts.configuration_chart(
                row["configurations"], "estimated_cost_usd_p50", costs_caption, format_usd
            ),
            "costs_caption": costs_caption,
            "utilization": charts.configuration_chart(
                [{**c, "gpu_mean": (c["utilization"].get("gpu") or {}).get("mean")} for c in row["configurations"]],
                "gpu_mean",
                "GPU utilization per configuration (median of the jobs' means, % of one GPU)",
                lambda percent: f"{percent:.0f}%",
            ),
        }
        # The recurring tasks first, then the one-off ones (a certification run), as the report's table.
        for row in sorted(rows, key=lambda row: not row["recurring"])
    ]
    return render("capacity.html", tasks=tasks, bad=bad)


def wait_compared(wait: float, waits: list[float]) -> str:
    """This job's wait among its task's, in words that stay true at the ends ("longer than 0 of 4" does not)."""
    jobs = len(waits)
    longer = sum(1 for other in waits if other < wait)
    shorter = sum(1 for other in waits if other > wait)
    if jobs <= 1:
        return "this task's only job in the ledger"
    if longer == 0 and shorter == 0:
        return f"as long as each of this task's {jobs} jobs"
    tied = "" if jobs - longer - shorter == 1 else "tied for "  # waits as long as this one, itself included
    if longer == 0:
        return f"{tied}the shortest of this task's {jobs} jobs"
    if shorter == 0:
        return f"{tied}the longest of this task's {jobs} jobs"
    return f"longer than {longer} of this task's {jobs} jobs"


def _task_instance_body(
    this: ledger_entry.LedgerEntry | None, history: list[ledger_entry.LedgerEntry], advice: dict[str, Any] | None
) -> str:
    from airflow_sm_prefs.surface import charts

    if this is None:
        return render("task_instance.html", this=None, advice=advice)
    waits = sorted(float(e["pending_seconds"]) for e in history)
    return render(
        "task_instance.html",
        this=this,
        advice=advice,
        compared=wait_compared(float(this["pending_seconds"]), waits),
        median_wait=report.percentile(waits, 0.5),
        cost=_cost_cell(this),
        utilization=report_text.utilization_details(this.get("utilization")),
        waits=charts.wait_chart(history),
    )


# What Airflow's UI leaves in a task instance tab's link when the task is not mapped: the placeholder, unfilled.
UNFILLED_MAP_INDEX = "{MAP_INDEX}"


def _run_id(text: str) -> str:
    """The run id from the tab's link. Airflow 3.1's UI puts the run id into the link unencoded (3.2 and later
    encode it; read in each line's UI bundle), so the '+' of every run id's time offset arrives as a space;
    Airflow's run ids hold no spaces (``[scheduler] allowed_run_id_pattern``), so a space is that '+'."""
    return text.replace(" ", "+")


def _map_index(text: str) -> int:
    """The task instance's map index from the tab's link: an unmapped task's is -1, whether the UI filled the
    placeholder (``-1``), left it as it is, or left it out."""
    if text in (UNFILLED_MAP_INDEX, ""):
        return -1
    try:
        index = int(text)
    except ValueError:
        index = -2
    if index < -1:
        raise HTTPException(422, f"map_index must be -1 (not mapped) or a task's map index, not {text[:40]!r}")
    return index


def _weather_body(rows: list[dict[str, Any]]) -> str:
    from airflow_sm_prefs.analysis.weather import DAYS
    from airflow_sm_prefs.surface import charts

    return render("weather.html", grids=[charts.weather_grid(row, DAYS) for row in rows])


def _cost_cell(entry: ledger_entry.LedgerEntry) -> str:
    from airflow_sm_prefs.reference.prices import format_usd

    if entry.get("cost_basis") == "plan-backed":
        return "plan-backed (paid by the training plan, not priced on demand)"
    if entry.get("estimated_cost_usd") is None:
        return "unknown (no price for this type and Region in the price table)"
    return f"{format_usd(entry['estimated_cost_usd'])} at on-demand prices"
