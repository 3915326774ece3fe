"""Every locally checkable rule of spec §3, for training and processing: a clear error naming rule and entry."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.request.friendly_preferences import InstancePreference, to_api_entries
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.request.preferences import (
    RequestValidationError,
    cast_integers,
    is_templated,
    validate_processing_request,
    validate_training_request,
)
from tests.helpers import processing_request, training_request
from tests.validation_cases import (
    C5,
    G5,
    M5,
    P5,
    PLAN,
    PROCESSING_CASES,
    TRAINING_CASES,
    processing_with,
    training_with,
)


@pytest.mark.parametrize("case", sorted(TRAINING_CASES))
def test_training_rule(case):
    request, expected = TRAINING_CASES[case]
    with pytest.raises(RequestValidationError) as error:
        validate_training_request(request)
    assert expected in str(error.value)


@pytest.mark.parametrize("case", sorted(PROCESSING_CASES))
def test_processing_rule(case):
    request, expected = PROCESSING_CASES[case]
    with pytest.raises(RequestValidationError) as error:
        validate_processing_request(request)
    assert expected in str(error.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(RequestValidationError) as error:
        validate_training_request(
            training_with(P5, P5, stopping={"MaxWaitTimeInSeconds": 10}, InstanceType="ml.g5.48xlarge")
        )
    assert len(error.value.problems) == 3


def test_valid_requests_pass_and_cpu_only_pending_limit_warns():
    assert validate_training_request(training_with(P5, G5, stopping={"MaxPendingTimeInSeconds": 3600})) == []
    assert validate_training_request(training_with({**P5, "TrainingPlanArns": [PLAN]}, G5)) == []
    assert validate_processing_request(processing_with(M5, C5)) == []
    warnings = validate_training_request(training_with(M5, C5, stopping={"MaxPendingTimeInSeconds": 3600}))
    assert "has no effect" in warnings[0]


def test_templated_values_are_left_for_after_rendering():
    request = training_with({"InstanceType": "{{ params.gpu }}", "InstanceCount": "{{ params.count }}"}, G5)
    assert validate_training_request(request) == []
    assert is_templated(request)


def test_friendly_forms_become_api_entries():
    entries = to_api_entries(
        [
            InstancePreference("ml.p5.48xlarge", 1, PLAN),
            {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
            ("ml.g5.48xlarge", 4),
            "ml.g6.48xlarge",
        ]
    )
    assert entries == [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "TrainingPlanArns": [PLAN]},
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 4},
        {"InstanceType": "ml.g6.48xlarge"},
    ]
    with pytest.raises(RequestValidationError, match="preference #1"):
        to_api_entries([3.5])


def test_a_plan_named_in_snake_case_is_one_plan_and_each_refusal_says_what_was_given():
    assert to_api_entries([{"instance_type": "ml.p5.48xlarge", "count": 2, "training_plan_arn": PLAN}]) == [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "TrainingPlanArns": [PLAN]}
    ]
    refusals = {
        "a mapping": (
            {"ml.p5.48xlarge": 2},
            "preferences is a mapping; give an ordered list such as "
            "[('ml.p5.48xlarge', 2), ('ml.p4d.24xlarge', 4)] (a mapping's keys and values could mean types "
            "and counts, or one preference's fields)",
        ),
        "a set": ({"ml.p5.48xlarge"}, "preferences is a set, which has no order; give a list, first choice first"),
        "text": ("ml.p5.48xlarge", "preferences must be a list of preferences, first choice first; got str"),
        "an odd entry": (
            ["ml.g5.xlarge", 3.5],
            "preference #2: expected InstancePreference, a mapping, a type name or (type, count); got float 3.5",
        ),
    }
    for what, (given, said) in refusals.items():
        with pytest.raises(RequestValidationError) as refused:
            to_api_entries(given)
        assert refused.value.problems == [said], what


def test_rendered_integer_strings_are_cast_including_per_preference_counts():
    request = training_with(
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": "2"},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": " 4 "},
        stopping={"MaxPendingTimeInSeconds": "3600"},
        VolumeSizeInGB="100",
    )
    cast = cast_integers(request, TRAINING.integer_paths)
    resources = cast["ResourceConfig"]
    assert [e["InstanceCount"] for e in resources["InstancePreferences"]] == [2, 4]
    assert resources["VolumeSizeInGB"] == 100
    assert cast["StoppingCondition"]["MaxPendingTimeInSeconds"] == 3600
    assert request["ResourceConfig"]["VolumeSizeInGB"] == "100", "the input must not be mutated"
    processing = cast_integers(
        processing_with({"InstanceType": "ml.m5.xlarge", "InstanceCount": "3"}), PROCESSING.integer_paths
    )
    assert processing["ProcessingResources"]["ClusterConfig"]["InstancePreferences"][0]["InstanceCount"] == 3


def test_non_numeric_rendered_count_is_a_clear_error():
    with pytest.raises(
        RequestValidationError, match=r"preference #2 \(ml.g5.48xlarge\): InstanceCount: expected an integer"
    ):
        cast_integers(
            training_with(P5, {"InstanceType": "ml.g5.48xlarge", "InstanceCount": "two"}), TRAINING.integer_paths
        )


def test_prepare_merges_friendly_preferences_and_max_pending():
    config = training_request("job", None)
    request = TRAINING.prepare(config, [("ml.p5.48xlarge", 1), ("ml.g5.48xlarge", 2)], 7200)
    assert request["ResourceConfig"]["InstancePreferences"][1] == {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2}
    assert request["StoppingCondition"]["MaxPendingTimeInSeconds"] == 7200
    assert "InstancePreferences" not in config["ResourceConfig"]
    processing = PROCESSING.prepare(processing_request("job", None), ["ml.m5.xlarge"], 600)
    assert "MaxPendingTimeInSeconds" not in processing["StoppingCondition"], "processing patience is caller-side"
    with pytest.raises(RequestValidationError, match="keep one"):
        TRAINING.prepare(training_with(P5), [("ml.g5.48xlarge", 1)])


def test_the_errors_old_name_still_catches_it():
    from airflow_sm_prefs import InvalidJobRequest
    from airflow_sm_prefs.request.preferences import PreferenceValidationError, RequestValidationError

    assert PreferenceValidationError is RequestValidationError
    assert issubclass(InvalidJobRequest, PreferenceValidationError)
