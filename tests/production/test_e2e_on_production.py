"""The end-to-end demo and browser tests (tests/e2e/test_demo_e2e.py) on the production topology: PostgreSQL,
Redis, two Celery workers and two triggerers. The tests are the e2e module's own; only the stack differs.
Screenshots go to artifacts/e2e-production/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_sm_prefs.local_stack import LocalStack
from tests.e2e import test_demo_e2e as e2e
from tests.production.stack import ProductionDemoStack

pytestmark = [pytest.mark.airflow, pytest.mark.emulator]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from e2e.running_demo(ProductionDemoStack, tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def screenshots() -> Path:
    return e2e.screenshot_folder("e2e-production")


certification = e2e.certification
nights = e2e.nights
demo = e2e.demo

test_four_nights_of_weather_and_the_verdict_they_earn = e2e.test_four_nights_of_weather_and_the_verdict_they_earn
test_certification_keeps_the_candidates_that_passed_and_the_nightly_dag_lists_only_those = (
    e2e.test_certification_keeps_the_candidates_that_passed_and_the_nightly_dag_lists_only_those
)
test_pipeline_falls_back_and_records_the_choice = e2e.test_pipeline_falls_back_and_records_the_choice
test_both_jobs_are_in_the_capacity_ledger_and_its_report = e2e.test_both_jobs_are_in_the_capacity_ledger_and_its_report
test_jobs_read_and_write_s3_so_downstream_tasks_read_their_output = (
    e2e.test_jobs_read_and_write_s3_so_downstream_tasks_read_their_output
)
test_credentials_never_reach_logs = e2e.test_credentials_never_reach_logs
test_the_demo_listens_on_loopback_only_with_a_generated_password = (
    e2e.test_the_demo_listens_on_loopback_only_with_a_generated_password
)
test_ui_shows_the_chosen_configuration_and_the_sagemaker_link = (
    e2e.test_ui_shows_the_chosen_configuration_and_the_sagemaker_link
)
test_every_capacity_route_refuses_an_unauthenticated_request = (
    e2e.test_every_capacity_route_refuses_an_unauthenticated_request
)
test_the_capacity_page_in_the_airflow_ui = e2e.test_the_capacity_page_in_the_airflow_ui


def test_the_demo_ran_on_postgres_and_celery(stack: LocalStack) -> None:
    env = stack.airflow_env()
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert sum(name.startswith("triggerer") for name in stack.components) == 2
