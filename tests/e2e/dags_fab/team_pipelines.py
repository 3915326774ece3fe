"""Two teams' pipelines for the FAB auth manager test: each team's role may read its own DAG only."""

from __future__ import annotations

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

for team in ("team_a", "team_b"):
    with DAG(f"{team}_pipeline", schedule=None, access_control={team: {"DAGs": {"can_read"}}}):
        EmptyOperator(task_id="fine_tune")
