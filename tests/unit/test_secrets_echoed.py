"""Secrets a job echoes stay masked in everything that stores or logs what the job said (#27: secrets x stores).

A secret registered with Airflow's masker (as a masked Variable read by a template, or a connection's password,
is) and then echoed by the job in its failure reason, status message or log lines never reaches the XCom
record, the ledger entry, the trigger event kept in ``next_kwargs``, the error message or a log line in clear.
"""

from __future__ import annotations

import secrets

import pytest
from airflow.sdk.log import mask_secret

from airflow_sm_prefs.evidence import ledger_entry
from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from airflow_sm_prefs.surface.certification_dag import verdict
from airflow_sm_prefs.task.task_failures import ended_job_error
from airflow_sm_prefs.wait.log_follower import LogLine
from tests.unit.test_record import training_description


@pytest.fixture
def secret() -> str:
    value = f"hunter2-{secrets.token_hex(8)}"
    mask_secret(value)
    return value


def _failed(secret: str) -> dict:
    description = training_description()
    description["TrainingJobStatus"] = "Failed"
    description["FailureReason"] = f"AlgorithmError: could not log in with password={secret} (exit code 1)"
    description["SecondaryStatusTransitions"][-1]["StatusMessage"] = f"token {secret} rejected"
    return description


def _view(description: dict) -> JobView:
    return JobView.parse(TRAINING, description)


STORES = {
    "the XCom record": lambda d: record.build(JobFacts.of(_view(d), "us-east-1")),
    "the ledger entry": lambda d: ledger_entry.entry_for(
        JobFacts.of(_view(d), "us-east-1"), dag_id="d", task_id="t", run_id="r", map_index=-1
    ),
    "the trigger event (next_kwargs)": lambda d: TRAINING.essentials(d),
    "the certification result": lambda d: verdict(record.build(JobFacts.of(_view(d), "us-east-1")), None),
    "the task's error": lambda d: str(ended_job_error(_view(d), record.build(JobFacts.of(_view(d), "us-east-1")))),
    "the progress line": lambda d: _view(d).status_message,
}


@pytest.mark.parametrize("store", STORES)
def test_a_secret_in_what_the_job_says_is_masked_in_every_store(secret, store):
    stored = repr(STORES[store](_failed(secret)))
    assert secret not in stored and "***" in stored, stored[:500]


def test_a_secret_in_a_log_line_is_masked(secret):
    line = LogLine.of({"logStreamName": "job/algo-1-1", "message": f"export TOKEN={secret}", "timestamp": 1})
    assert line.render() == "[job/algo-1-1] export TOKEN=***"


def test_the_task_names_the_variables_and_connections_its_templates_read_for_the_trigger(monkeypatch):
    """Rendering remembers which Variables (names and JSON or not, never values) and connections (ids) the
    templates read, so the trigger can read them again in the triggerer; the context's accessors are Airflow's
    again afterwards."""
    from airflow.sdk.execution_time.context import ConnectionAccessor, VariableAccessor

    from airflow_sm_prefs import SageMakerPreferenceTrainingOperator
    from airflow_sm_prefs.platform.redaction import SecretsRead
    from tests.helpers import training_request

    monkeypatch.setenv("AIRFLOW_VAR_SM_PREFS_API_TOKEN", "token-value")
    monkeypatch.setenv("AIRFLOW_VAR_SETTINGS", '{"bucket": "team-bucket"}')
    monkeypatch.setenv("AIRFLOW_CONN_SM_PREFS_REGISTRY", '{"conn_type": "generic", "password": "registry-pass"}')
    config = training_request("{{ var.json.settings.bucket }}-job")
    config["Environment"] = {
        "API_TOKEN": "{{ var.value.sm_prefs_api_token }}",
        "MISSING": "{{ var.value.get('x', '-') }}",
        "REGISTRY_PASSWORD": "{{ conn.sm_prefs_registry.password }}",
        "NO_CONNECTION": "{{ conn.get('absent') }}",
    }
    operator = SageMakerPreferenceTrainingOperator(
        task_id="train", config=config, preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2)]
    )
    accessors = {"value": VariableAccessor(deserialize_json=False), "json": VariableAccessor(deserialize_json=True)}
    connections = ConnectionAccessor()
    context = {"var": dict(accessors), "conn": connections, "ds": "2026-12-01"}
    operator.render_template_fields(context)  # type: ignore[arg-type]
    assert operator.config["Environment"]["API_TOKEN"] == "token-value"
    assert operator.config["Environment"]["REGISTRY_PASSWORD"] == "registry-pass"
    assert operator.config["TrainingJobName"] == "team-bucket-job"
    read = SecretsRead({("settings", True), ("sm_prefs_api_token", False)}, {"sm_prefs_registry"})
    assert operator._secrets_read == read, "neither x nor absent exists"
    assert context["var"] == accessors and all(type(a) is VariableAccessor for a in context["var"].values())
    assert context["conn"] is connections

    # A mapped task's templates are rendered through the unmapped task's _do_render_template_fields.
    unmapped = SageMakerPreferenceTrainingOperator(
        task_id="train_mapped", config=config, preferences=[("ml.p5.48xlarge", 1), ("ml.p4d.24xlarge", 2)]
    )
    unmapped._do_render_template_fields(
        parent=unmapped,
        template_fields=unmapped.template_fields,
        context=context,
        jinja_env=unmapped.get_template_env(),
        seen_oids=set(),
    )
    assert unmapped._secrets_read == read
