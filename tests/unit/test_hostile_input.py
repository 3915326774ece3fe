"""Hostile input to the operators, by class: a template anywhere must not switch validation off, nothing is
misread silently, and every malformed argument gets the same kind of error as a rule (a field named, what
was expected), never a bare TypeError. Every case is judged when the operator is built, before any call."""

from __future__ import annotations

import copy
import datetime as dt
import math
from datetime import timedelta
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import DAG

from airflow_sm_prefs import SageMakerPreferenceProcessingOperator, SageMakerPreferenceTrainingOperator
from airflow_sm_prefs.request import job_request
from airflow_sm_prefs.request.job_request import InvalidJobRequest
from airflow_sm_prefs.request.preferences import RequestValidationError, validate_training_request
from tests.helpers import GPU_PAIR, processing_request, training_request
from tests.validation_cases import PROCESSING_CASES, TRAINING_CASES

OPERATORS = {"training": SageMakerPreferenceTrainingOperator, "processing": SageMakerPreferenceProcessingOperator}
CASES = [
    (kind, case) for kind, cases in (("training", TRAINING_CASES), ("processing", PROCESSING_CASES)) for case in cases
]


def _judged_once_rendered(operator: Any) -> Any:
    """What the task judges after rendering (``job_request.rendered``), short of the installed botocore's type list."""
    return job_request.prepare(
        operator.job_kind,
        operator.config,
        operator.preferences,
        max_pending=operator.max_pending,
        markers=(),
        job_name=operator.job_name,
    )


def _build(kind: str, config: Any, **kwargs: Any) -> Any:
    return OPERATORS[kind](task_id="job", config=config, **kwargs)


def _refused(kind: str, config: Any, expected: str, **kwargs: Any) -> str:
    with pytest.raises(InvalidJobRequest) as error:
        _build(kind, config, **kwargs)
    assert expected in str(error.value), str(error.value)
    return str(error.value)


# -- 1. a template anywhere must not switch validation off ------------------------------------------------

TEMPLATED_ELSEWHERE = {
    "role from a Variable": lambda request: request.update(RoleArn="{{ var.value.role_arn }}"),
    "job name with a macro": lambda request: request.update(
        {next(k for k in request if k.endswith("JobName")): "eval-{{ ds_nodash }}"}
    ),
    "an S3 path with ds": lambda request: request.update(Environment={"DATA": "s3://bucket/{{ ds }}/"}),
    "a Jinja comment": lambda request: request.update(Environment={"NOTE": "{# reviewed #}nightly"}),
}


@pytest.mark.parametrize("placement", sorted(TEMPLATED_ELSEWHERE))
@pytest.mark.parametrize("kind, case", CASES)
def test_a_template_elsewhere_in_config_leaves_every_rule_checked_at_parse_time(kind, case, placement):
    if case == "job-name" and placement == "job name with a macro":
        pytest.skip("the template replaces the very value the case is about")
    request, expected = copy.deepcopy((TRAINING_CASES if kind == "training" else PROCESSING_CASES)[case])
    TEMPLATED_ELSEWHERE[placement](request)
    _refused(kind, request, expected)


def test_one_templated_count_leaves_the_rest_of_the_list_checked():
    entries = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": "{{ params.count }}"},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 0},
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    ]
    message = _refused("training", training_request("job", entries), "already preference #1")
    assert "preference #2 (ml.g5.48xlarge): InstanceCount must be at least 1" in message


def test_templated_values_alone_are_left_for_run_time():
    entries = [
        {"InstanceType": "{{ params.first }}", "InstanceCount": "{{ params.count }}"},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2},
    ]
    _build("training", training_request("job-{{ ds_nodash }}", entries, VolumeSizeInGB="{{ params.gb }}"))


@pytest.mark.parametrize(
    "options, value",
    [
        ({"variable_start_string": "[[", "variable_end_string": "]]"}, "[[ params.instance_type ]]"),
        ({"block_start_string": "<%", "block_end_string": "%>"}, "<% if true %>ml.g5.48xlarge<% endif %>"),
        ({"comment_start_string": "<#", "comment_end_string": "#>"}, "ml.g5.48xlarge<# fallback #>"),
    ],
    ids=["variables", "blocks", "comments"],
)
def test_a_dags_own_jinja_delimiters_are_recognised_as_templates(options, value):
    entries = [{"InstanceType": value, "InstanceCount": 1}, {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}]
    with DAG("custom_delimiters", schedule=None, jinja_environment_kwargs=options):
        _build("training", training_request("job", entries))
    with DAG("default_delimiters", schedule=None):
        _refused("training", training_request("job", entries), "is not an instance type")


def test_a_jinja_comment_in_a_value_is_a_template():
    entries = [{"InstanceType": "ml.g5.48xlarge{# main #}", "InstanceCount": 1}]
    _build("training", training_request("job", entries))


def test_every_validation_failure_fails_the_task_without_retries():
    """A mapped task builds its operator when it runs; the error it raises then must not be retried."""
    assert issubclass(InvalidJobRequest, AirflowFailException)
    with pytest.raises(AirflowFailException):
        _build("training", training_request("job", [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 0}]))
    with pytest.raises(AirflowFailException):
        _build("training", training_request("job", GPU_PAIR), wait_timeout=-1)


def test_a_templated_list_rendered_as_python_text_says_how_to_fix_it():
    operator = _build("training", training_request("job", None, InstanceCount=1), preferences="{{ params.prefs }}")
    operator.preferences = "['ml.p5.48xlarge', 'ml.p4d.24xlarge']"  # what Jinja renders without native objects
    with pytest.raises(InvalidJobRequest, match="render_template_as_native_obj=True"):
        _judged_once_rendered(operator)


def test_a_rendered_value_that_contains_braces_is_judged_not_skipped():
    operator = _build("training", training_request("job", None, InstanceCount=1), preferences="{{ params.prefs }}")
    operator.preferences = '["ml.{{p5}}.48xlarge"]'  # rendered text is final, whatever it contains
    with pytest.raises(InvalidJobRequest, match="is not an instance type"):
        _judged_once_rendered(operator)


# -- 2. nothing misread silently ----------------------------------------------------------------------------

FRIENDLY_FORMS = {
    "a mapping of types to counts": ({"ml.p5.48xlarge": 2, "ml.p4d.24xlarge": 4}, "is a mapping"),
    "a set": ({"ml.p5.48xlarge", "ml.p4d.24xlarge"}, "is a set"),
    "a number": (5, "must be a list"),
    "bytes": (b"ml.p5.48xlarge", "must be a list"),
    "a triple": ([("ml.p5.48xlarge", 2, "extra")], "preference #1: expected"),
    "a nested list": ([["ml.p5.48xlarge"]], "preference #1: expected"),
    "a bare type name that is not JSON": ("ml.p5.48xlarge", "not JSON"),
}


@pytest.mark.parametrize("name", sorted(FRIENDLY_FORMS))
def test_a_friendly_form_that_could_be_misread_is_refused(name):
    value, expected = FRIENDLY_FORMS[name]
    _refused("training", training_request("job", None, InstanceCount=1), expected, preferences=value)


def test_pairs_as_lists_mean_type_and_count():
    operator = _build("training", training_request("job", None), preferences=[["ml.p5.48xlarge", 2]])
    assert operator._request["ResourceConfig"]["InstancePreferences"] == [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2}
    ]


def test_max_pending_that_contradicts_config_is_refused_and_one_that_agrees_is_not():
    request = training_request("job", GPU_PAIR)
    request["StoppingCondition"]["MaxPendingTimeInSeconds"] = 7200
    _refused("training", request, "disagree", max_pending=timedelta(hours=3))
    operator = _build("training", request, max_pending=7200)
    assert operator._request["StoppingCondition"]["MaxPendingTimeInSeconds"] == 7200


DURATIONS = {
    "zero": 0,
    "negative": -60,
    "NaN": math.nan,
    "infinite": math.inf,
    "a duration string": "4h",
    "a boolean": True,
    "a negative timedelta": timedelta(minutes=-5),
    "more than a year": timedelta(days=400),
}


@pytest.mark.parametrize("argument", ["wait_timeout", "max_pending"])
@pytest.mark.parametrize("kind", ["training", "processing"])
@pytest.mark.parametrize("name", sorted(DURATIONS))
def test_a_duration_that_is_not_a_positive_finite_time_is_refused(kind, argument, name):
    config = (
        training_request("job", GPU_PAIR) if kind == "training" else processing_request("job", None, InstanceCount=1)
    )
    if kind == "processing":
        config["ProcessingResources"]["ClusterConfig"]["InstancePreferences"] = [{"InstanceType": "ml.m5.xlarge"}]
    _refused(kind, config, argument, **{argument: DURATIONS[name]})


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "60", True])
def test_a_check_interval_that_is_not_a_positive_finite_number_is_refused(value):
    _refused("training", training_request("job", GPU_PAIR), "check_interval", check_interval=value)


def _with(kind: str, path: tuple[str, ...], value: Any) -> dict[str, Any]:
    if kind == "training":
        request = training_request("job", GPU_PAIR)
    else:
        request = processing_request("job", [{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}])
        request["StoppingCondition"] = {"MaxRuntimeInSeconds": 3600}
    node = request
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return request


MALFORMED = {
    # (kind, path, value, text the error must hold)
    "training ResourceConfig None": ("training", ("ResourceConfig",), None, "ResourceConfig must be a mapping"),
    "training ResourceConfig a list": ("training", ("ResourceConfig",), [], "ResourceConfig must be a mapping"),
    "training StoppingCondition a list": ("training", ("StoppingCondition",), [3600], "StoppingCondition must be"),
    "training StoppingCondition a number": ("training", ("StoppingCondition",), 3600, "StoppingCondition must be"),
    "processing ClusterConfig None": (
        "processing",
        ("ProcessingResources", "ClusterConfig"),
        None,
        "ProcessingResources.ClusterConfig must be a mapping",
    ),
    "processing ProcessingResources text": ("processing", ("ProcessingResources",), "big", "must be a mapping"),
    "processing StoppingCondition text": ("processing", ("StoppingCondition",), "1h", "StoppingCondition must be"),
    "a job name one character too long": ("training", ("TrainingJobName",), "j" * 64, "at most 63"),
    "a job name that is a number": ("processing", ("ProcessingJobName",), 42, "must be a string"),
    "training volume as a boolean": ("training", ("ResourceConfig", "VolumeSizeInGB"), True, "must be an integer"),
    "training runtime of zero": ("training", ("StoppingCondition", "MaxRuntimeInSeconds"), 0, "[R26]"),
    "training keep-alive too long": ("training", ("ResourceConfig", "KeepAlivePeriodInSeconds"), 21601, "[R26]"),
    "training runtime as a float": ("training", ("StoppingCondition", "MaxRuntimeInSeconds"), 1.5, "an integer"),
    "processing volume of zero": (
        "processing",
        ("ProcessingResources", "ClusterConfig", "VolumeSizeInGB"),
        0,
        "1 to 16384",
    ),
    "processing volume too large": (
        "processing",
        ("ProcessingResources", "ClusterConfig", "VolumeSizeInGB"),
        16385,
        "[P15]",
    ),
    "processing runtime too long": ("processing", ("StoppingCondition", "MaxRuntimeInSeconds"), 777601, "[P15]"),
    "processing count as a boolean": (
        "processing",
        ("ProcessingResources", "ClusterConfig", "InstancePreferences"),
        [{"InstanceType": "ml.m5.xlarge", "InstanceCount": True}],
        "must be an integer",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_structure_names_the_field(name):
    kind, path, value, expected = MALFORMED[name]
    _refused(kind, _with(kind, path, value), expected)


@pytest.mark.parametrize("config", [["not", "a", "mapping"], 5, None, "[1, 2]"], ids=["list", "int", "None", "json"])
def test_a_config_that_is_not_a_request_is_refused(config):
    operator_kind = "training"
    if isinstance(config, str):
        operator = _build(operator_kind, config)  # JSON text is judged once rendered
        with pytest.raises(InvalidJobRequest, match="config must be the TrainingJob request"):
            _judged_once_rendered(operator)
        return
    _refused(operator_kind, config, "config must be the TrainingJob request")


@pytest.mark.parametrize("job_name", ["bad_name!", "x" * 64, "-leading-hyphen"])
def test_the_job_name_argument_is_checked_like_the_config_field(job_name):
    _refused("training", training_request("job", GPU_PAIR), "job_name", job_name=job_name)


def test_a_templated_job_name_argument_is_checked_once_rendered():
    operator = _build("training", training_request("job", GPU_PAIR), job_name="eval-{{ ds_nodash }}")
    operator.job_name = "eval_2026-11-30"  # what it rendered to: an underscore SageMaker refuses
    with pytest.raises(InvalidJobRequest, match="job_name"):
        _judged_once_rendered(operator)


def test_every_entry_is_counted_from_one_in_every_message():
    entries = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": "two"},
    ]
    message = _refused("training", training_request("job", entries), "preference #2 (ml.g5.48xlarge)")
    assert "[1]" not in message


@pytest.mark.parametrize("naive", ["2030-01-01T00:00:00", "2030-01-01", " 2030-01-01T06:00 ", dt.datetime(2030, 1, 1)])
def test_finish_by_without_a_time_zone_is_refused_as_text_or_datetime(naive):
    from airflow_sm_prefs.preflight import finish_by

    with pytest.raises(RequestValidationError, match="has no time zone"):
        finish_by.deadline_of(naive)
    with pytest.raises(RequestValidationError, match="has no time zone"):
        SageMakerPreferenceTrainingOperator(
            task_id="t", config=training_request("x", [("ml.p5.48xlarge", 1)]), finish_by=naive
        )


@pytest.mark.parametrize("aware", ["2030-01-01T00:00:00Z", "2030-01-01T02:00:00+02:00"])
def test_finish_by_with_a_time_zone_is_taken_in_it(aware):
    from airflow_sm_prefs.preflight import finish_by

    assert finish_by.deadline_of(aware).isoformat() == "2030-01-01T00:00:00+00:00"


def _spot_problems(spot: Any) -> str:
    request = training_request("x", GPU_PAIR) | {"EnableManagedSpotTraining": spot}
    try:
        validate_training_request(request)
    except RequestValidationError as error:
        return str(error)
    return ""


@pytest.mark.parametrize("spot", [1, "yes", 1.0, "1", [True]])
def test_managed_spot_that_is_not_a_boolean_is_refused_at_parse_time(spot):
    assert "EnableManagedSpotTraining must be true or false" in _spot_problems(spot)


@pytest.mark.parametrize(("spot", "refused"), [(False, False), ("false", False), (True, True), ("True", True)])
def test_managed_spot_false_passes_and_true_is_refused(spot, refused):
    assert ("EnableManagedSpotTraining" in _spot_problems(spot)) is refused
