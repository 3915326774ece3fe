"""The end-to-end demo and browser tests (tests/e2e/test_demo_e2e.py) on the production topology: PostgreSQL,
Redis, two Celery workers and two triggerers, each component a host of its own that shares no disk with the
others (tests/production/stack.py). The tests are the e2e module's own; only the stack differs. Screenshots go
to artifacts/e2e-production/."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from sm_prefs_devkit.local_stack import LocalStack
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
planned = e2e.planned

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
test_the_advised_plan_is_bought_and_the_later_nights_run_on_it = (
    e2e.test_the_advised_plan_is_bought_and_the_later_nights_run_on_it
)


def test_the_demo_ran_on_postgres_and_celery(stack: LocalStack) -> None:
    env = stack.airflow_env()
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert sum(name.startswith("triggerer") for name in stack.components) == 2


def test_each_component_is_a_host_of_its_own_sharing_only_services_dags_and_s3(demo):
    """Every component runs in a home of its own; the ledger, the price table and the registry live on the
    emulator's S3, in no home; the API server shows a worker's task log from S3 (remote logging), never from
    the worker's folder. The nights above ran on that: their jobs are counted and priced, strict
    certification held, and the Capacity page showed them."""
    from tests.production.stack import LOGS_BUCKET, SHARED_BUCKET, SHARED_PREFIX

    stack, run_id = demo
    homes = {name: Path(stack.component_env(name)["AIRFLOW_HOME"]) for name in stack.components}
    assert len(set(homes.values())) == len(homes) >= 7, homes
    for name, home in homes.items():
        assert (home / "airflow.cfg").exists(), f"{name} did not set itself up in {home}"
        assert not (home / "sm_prefs").exists(), f"shared state written under {home}"
        # Each wrote its own part of the task logs at home: tries on workers, triggers' on triggerers.
        written = [path.name for path in (home / "logs").rglob("attempt=*")]
        if name.startswith("celery-worker"):
            assert written and all(".trigger." not in file for file in written), name
        elif name.startswith("triggerer"):
            assert all(".trigger." in file for file in written), name
        else:
            assert written == [], f"{name} wrote task logs: {written[:3]}"
    s3 = stack.aws_client("s3")
    shared = {o["Key"] for o in s3.list_objects_v2(Bucket=SHARED_BUCKET, Prefix=SHARED_PREFIX)["Contents"]}
    assert {f"{SHARED_PREFIX}/prices.json", f"{SHARED_PREFIX}/certified.yaml"} <= shared
    assert any(key.startswith(f"{SHARED_PREFIX}/ledger/") for key in shared)

    task = f"dag_id={stack.dag_id}/run_id={run_id}/task_id=fine_tune"
    assert not (stack.home_of("api-server") / "logs" / f"dag_id={stack.dag_id}").exists()
    uploaded = s3.list_objects_v2(Bucket=LOGS_BUCKET, Prefix=f"logs/{task}/")
    assert uploaded.get("KeyCount", 0) >= 1, "the workers shipped the task's log to S3"
    path = f"/api/v2/dags/{stack.dag_id}/dagRuns/{urllib.parse.quote(run_id)}/taskInstances/fine_tune/logs/1"
    shown = json.dumps(stack.get(path + "?full_content=true"))
    assert "SageMaker selected" in shown, shown[-2000:]
