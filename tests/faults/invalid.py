"""DAGs built from the shared invalid requests (tests/validation_cases.py) for the fault campaign.

Four ways in, each a way users write DAGs:
- static: one file per request (generated), so each is its own import error;
- static with a templated role: the same file with ``RoleArn`` from a Variable, which must not switch the
  parse-time checks off (it did before 0.2.0);
- templated: one DAG with a task per request, the request arriving through Jinja, so the operator only
  sees it after rendering;
- mapped: one ``.partial().expand(config=...)`` task per kind over all its requests, so each request is
  judged when Airflow expands it, at run time, and must fail without retries.
"""

from __future__ import annotations

from typing import Any

from tests.validation_cases import PROCESSING_CASES, TRAINING_CASES

# Guardrails (operator arguments, not requests): (kind, operator arguments, the text the error must hold).
# Static ones fail the DAG import; the templated ones fail their task before any create, on try 1.
_G5 = ("ml.g5.48xlarge", 1)
STATIC_GUARDRAIL_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "requires_gpu_memory": (
        "training",
        {"preferences": [("ml.p4d.24xlarge", 1), _G5], "requires": {"min_gpu_memory_gib": 40}},
        "preference #2 (1 x ml.g5.48xlarge)",
    ),
    "requires_efa": ("processing", {"preferences": [("ml.g5.xlarge", 1)], "requires": {"efa": True}}, "no EFA"),
    "requires_unknown_field": ("training", {"preferences": [_G5], "requires": {"gpu_mem": 40}}, "unknown field(s)"),
    "bad_on_violation": ("training", {"preferences": [_G5], "on_violation": "skip"}, "on_violation must be"),
    "bad_cost_cap": ("processing", {"preferences": [("ml.m5.xlarge", 1)], "max_cost_usd": -5}, "max_cost_usd must"),
    "bad_finish_by": ("training", {"preferences": [_G5], "finish_by": "at dawn"}, "finish_by must be a datetime"),
}
TEMPLATED_GUARDRAIL_CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    # campaign.yaml: the account's ml.p3.16xlarge quota is 1.
    "quota_short": ("training", {"preferences": [_G5, ("ml.p3.16xlarge", 2)]}, "for training job usage' is 1"),
    "finish_by_past": (
        "training",
        {"preferences": [_G5], "finish_by": "{{ '2020-01-01T00:00:00+00:00' }}"},
        "no preference can finish by finish_by=",
    ),
    "cost_cap_without_a_price": (
        "processing",
        {"preferences": [("ml.m5.xlarge", 1)], "max_hourly_cost_usd": "{{ 100 }}"},
        "no on-demand price for ml.m5.xlarge",
    ),
}

CASES: dict[str, dict[str, tuple[dict[str, Any], str]]] = {"training": TRAINING_CASES, "processing": PROCESSING_CASES}
TEMPLATED_DAG_ID = "invalid_templated"


def _operator(kind: str) -> Any:
    from airflow_sm_prefs import SageMakerPreferenceProcessingOperator, SageMakerPreferenceTrainingOperator

    return SageMakerPreferenceTrainingOperator if kind == "training" else SageMakerPreferenceProcessingOperator


STATIC_WAYS = ("static", "templated_role")
TEMPLATED_ROLE = "{{ var.value.get('sm_prefs_role_arn', 'arn:aws:iam::123456789012:role/SageMakerRole') }}"


def static_dag_id(kind: str, case: str, way: str = "static") -> str:
    return f"invalid_{way}_{kind}_{case}".replace("-", "_")


def mapped_task_id(kind: str) -> str:
    return f"{kind}_mapped"


def templated_task_id(kind: str, case: str) -> str:
    return f"{kind}_{case}".replace("-", "_")


def guardrail_task_id(case: str) -> str:
    return f"guardrail_{case}"


def _config(kind: str) -> dict[str, Any]:
    from tests.helpers import processing_request, training_request

    request = training_request("x", None) if kind == "training" else processing_request("x", None)
    request.pop("TrainingJobName" if kind == "training" else "ProcessingJobName")
    return request


def static_dag(kind: str, case: str, way: str = "static") -> Any:
    """Raises at parse time, as a DAG with that configuration written by hand would."""
    from airflow.sdk import DAG

    if way == "guardrail":
        kind, arguments, _ = STATIC_GUARDRAIL_CASES[case]
        with DAG(static_dag_id(kind, case, way), schedule=None) as dag:
            _operator(kind)(task_id="job", config=_config(kind), **arguments)
        return dag
    request, _ = CASES[kind][case]
    if way == "templated_role":
        request = {**request, "RoleArn": TEMPLATED_ROLE}
    with DAG(static_dag_id(kind, case, way), schedule=None) as dag:
        _operator(kind)(task_id="job", config=request)
    return dag


def templated_dag() -> Any:
    from airflow.sdk import DAG

    with DAG(TEMPLATED_DAG_ID, schedule=None, max_active_tasks=8) as dag:
        for kind, cases in CASES.items():
            for case, (request, _) in cases.items():
                _operator(kind)(
                    task_id=templated_task_id(kind, case),
                    config="{{ params.request | tojson }}",
                    params={"request": request},
                    retries=2,  # the failure must be final anyway: a bad request never gets better
                )
        for case, (kind, arguments, _) in TEMPLATED_GUARDRAIL_CASES.items():
            _operator(kind)(task_id=guardrail_task_id(case), config=_config(kind), retries=2, **arguments)
        for kind, cases in CASES.items():
            _operator(kind).partial(task_id=mapped_task_id(kind), retries=2).expand(
                config=[request for request, _ in cases.values()]
            )
    return dag


def static_dag_file(kind: str, case: str, way: str = "static") -> str:
    return (
        "# Generated by the fault campaign (airflow DAG file): one invalid static configuration.\n"
        "from tests.faults.invalid import static_dag\n\n"
        f"static_dag({kind!r}, {case!r}, {way!r})\n"
    )
