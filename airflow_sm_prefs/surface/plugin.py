"""The Airflow plugin of this provider: the listener that stops jobs of tasks ended by hand, and the Capacity
page (a FastAPI app in the API server, linked from the navigation and from every task instance)."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_sm_prefs.surface import listener

URL_PREFIX = "/sm-prefs"


class CapacityApp:
    """The Capacity page's ASGI app, built at its first request: every Airflow process loads this plugin
    (workers for the listener), and only the API server serves the page."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_sm_prefs.surface.capacity_page import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class SageMakerPreferencesPlugin(AirflowPlugin):
    name = "sm_prefs"
    listeners = [listener]
    fastapi_apps = [{"app": CapacityApp(), "url_prefix": URL_PREFIX, "name": "SageMaker capacity"}]
    external_views = [
        {
            "name": "Capacity",
            "href": "sm-prefs/capacity",
            "url_route": "sm-prefs-capacity",
            "destination": "nav",
            "category": "browse",
        },
        {
            "name": "SageMaker capacity",
            "href": "sm-prefs/capacity/dags/{DAG_ID}/task-instance?run_id={RUN_ID}&task_id={TASK_ID}"
            "&map_index={MAP_INDEX}",
            "url_route": "sm-prefs-task-instance",
            "destination": "task_instance",
        },
    ]
