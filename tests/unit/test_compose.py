"""docker-compose.yaml cannot start here (no Docker engine), so its structure is checked instead."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from airflow_sm_prefs.surface.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES = COMPOSE["services"]
LONG_RUNNING = [
    "postgres",
    "redis",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-worker",
    "airflow-triggerer",
    "sagemaker-emulator",
]


def _env_file(name: str) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in (ROOT / name).read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    return dict(pairs)


def test_services_match_the_official_shape():
    assert set(SERVICES) == {*LONG_RUNNING, "airflow-init"}
    for name in LONG_RUNNING:
        assert "healthcheck" in SERVICES[name], name
    common = COMPOSE["x-airflow-common"]
    assert common["environment"]["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert common["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert common["environment"]["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
    for name in (
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-worker",
        "airflow-triggerer",
    ):
        assert SERVICES[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"


def test_the_provider_is_built_in_and_checked_at_init():
    assert COMPOSE["x-airflow-common"]["build"] == "."
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "FROM apache/airflow:${AIRFLOW_VERSION}-python3.11" in dockerfile
    assert "pip install" in dockerfile and "/opt/airflow-sm-prefs" in dockerfile
    assert "airflow providers list | grep -q airflow-sm-prefs" in "\n".join(SERVICES["airflow-init"]["command"])


def test_the_image_copies_everything_the_build_reads():
    import tomllib

    copied = " ".join(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("COPY"))
    # The package, and the development kit the emulator service runs from; a file is copied when its path is
    # a source or a destination of a COPY (devkit/LICENSE links to the root's, so the root's is copied there).
    for folder, package in (("", "airflow_sm_prefs"), ("devkit/", "devkit/sm_prefs_devkit")):
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        for needed in ["pyproject.toml", project["readme"], *project["license-files"]]:
            path = folder + needed
            assert path in copied or f"/opt/airflow-sm-prefs/{path}" in copied, (
                f"the image build reads {path}, which the Dockerfile does not copy"
            )
        assert package in copied


def test_the_emulator_is_an_optional_profile_reachable_only_inside_the_network():
    emulator = SERVICES["sagemaker-emulator"]
    assert emulator["profiles"] == ["emulator"]
    assert "ports" not in emulator, "the emulator must not be published on the host"
    arguments = build_parser().parse_args(emulator["command"][1:])
    assert (arguments.scenario, arguments.port, arguments.container_network) == ("gpu-shortage", 8907, True)


def test_the_aws_connection_is_wired_per_target():
    assert COMPOSE["x-airflow-common"]["env_file"] == ["${SM_PREFS_ENV_FILE:-compose/aws.env}"]
    emulator = json.loads(_env_file("compose/emulator.env")["AIRFLOW_CONN_AWS_DEFAULT"])
    assert emulator["extra"]["endpoint_url"] == "http://sagemaker-emulator:8907"
    real = json.loads(_env_file("compose/aws.env")["AIRFLOW_CONN_AWS_DEFAULT"])
    assert "endpoint_url" not in real["extra"] and "password" not in real


def test_no_fixed_admin_password_and_ui_on_loopback():
    environment = COMPOSE["x-airflow-common"]["environment"]
    assert environment["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"  # user:role, no password
    assert not any("PASSWORD" in key for key in environment)
    assert SERVICES["airflow-apiserver"]["ports"] == ["127.0.0.1:8080:8080"]


def test_the_production_stack_runs_what_the_compose_file_declares():
    """tests/production/stack.py is the compose file's topology without Docker: the same components, as many
    of each, with the same commands (less the flags one host needs), and the settings that make it that
    topology: CeleryExecutor, PostgreSQL through psycopg2, Redis as the broker, results in PostgreSQL."""
    from tests.production.services import Services
    from tests.production.stack import components

    host_only = {"--celery-hostname", "--concurrency", "--skip-serve-logs"}

    def command(args: tuple[str, ...]) -> str:
        kept, skip = [], False
        for arg in args:
            if skip:
                skip = False
            elif arg in host_only:
                skip = arg != "--skip-serve-logs"
            else:
                kept.append(arg)
        return " ".join(kept)

    declared = {}
    for service in COMPOSE["services"].values():
        if isinstance(service.get("command"), str) and service["command"] in (
            "api-server",
            "scheduler",
            "dag-processor",
            "celery worker",
            "triggerer",
        ):
            declared[service["command"]] = service.get("deploy", {}).get("replicas", 1)
    ran: dict[str, int] = {}
    for args in components().values():
        ran[command(args)] = ran.get(command(args), 0) + 1
    assert ran == declared
    compose_env = COMPOSE["x-airflow-common"]["environment"]
    stack_env = Services(postgres_port=5432, redis_port=6379).airflow_env()
    assert stack_env["AIRFLOW__CORE__EXECUTOR"] == compose_env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    for key, scheme in (
        ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql+psycopg2://airflow:airflow@"),
        ("AIRFLOW__CELERY__RESULT_BACKEND", "db+postgresql://airflow:airflow@"),
        ("AIRFLOW__CELERY__BROKER_URL", "redis://"),
    ):
        assert stack_env[key].startswith(scheme) and compose_env[key].startswith(scheme), key
    assert set(COMPOSE["services"]) >= {"postgres", "redis"}
