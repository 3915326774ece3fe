"""The rulebook's words, whole: each problem a user reads, exactly, and each bound met at its edge.

``tests/validation_cases.py`` holds the text each case's error must contain (the fault campaign looks for it in
Airflow's import errors); here every problem is pinned whole, so a changed word, rule id or bound shows."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.request.preferences import (
    RequestValidationError,
    brief,
    cast_integers,
    duration_seconds,
    interval_seconds,
    is_accelerated,
    is_templated,
    template_markers,
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

ONE_COUNT_EACH = "set it on every preference or once for the job"

TRAINING_WORDS = {
    "R1": ["ResourceConfig.InstancePreferences: the preference list is empty; give 1 to 5 entries [R1/P1]"],
    "R2": ["ResourceConfig.InstancePreferences: 6 preferences given; SageMaker accepts at most 5 [R2]"],
    "R3": ["preference #1: InstanceType is required [R3/P3]"],
    "R4a": [
        "preference #3 (ml.p5.48xlarge): ml.p5.48xlarge is already preference #1; each type may appear only once [R4a]"
    ],
    "R4b": ["preference #2 (ml.g5.48xlarge): InstanceCount must be set on every preference or on none [R4b]"],
    "R4c": [
        f"preference #1 (ml.p5.48xlarge): InstanceCount is set both here and at the job level; {ONE_COUNT_EACH} [R4c]"
    ],
    "R4d": [f"ResourceConfig.InstancePreferences: no InstanceCount given; {ONE_COUNT_EACH} [R4d]"],
    "R5": ["preference #1 (ml.p5.48xlarge): InstanceCount must be at least 1, got -1 [R4]"],
    "R5-zero": ["preference #1 (ml.p5.48xlarge): InstanceCount must be at least 1, got 0 [R4]"],
    "R5-type": ["preference #1 (ml.p5.48xlarge): InstanceCount must be an integer, got True [R4]"],
    "R6": ["ResourceConfig.InstanceType cannot be combined with InstancePreferences [R6]"],
    "R7": ["ResourceConfig.InstanceGroups cannot be combined with InstancePreferences [R7]"],
    "R8": ["ResourceConfig.InstancePlacementConfig cannot be combined with InstancePreferences [R8]"],
    "R9": ["EnableManagedSpotTraining=true cannot be combined with InstancePreferences [R9/R10]"],
    "R11": ["preference #1 (ml.p5.48xlarge): TrainingPlanArns must hold exactly one training plan ARN [R11]"],
    "R11-empty": ["preference #1 (ml.p5.48xlarge): TrainingPlanArns must hold exactly one training plan ARN [R11]"],
    "R13": ["ResourceConfig.TrainingPlanArn and per-preference TrainingPlanArns cannot both be set [R13]"],
    "R15": ["preference #1 (ml.p5.48xlarge): training plan ARN 'arn:short' must be 50 to 2048 characters [R15/R16]"],
    "R16": [
        f"preference #1 (ml.p5.48xlarge): training plan ARN {'x' * 60!r} is not a SageMaker training-plan ARN [R16]"
    ],
    "R19": ["preference #1 (g5.48xlarge): 'g5.48xlarge' is not an instance type such as 'ml.g5.48xlarge' [R19]"],
    "R20": ["ResourceConfig.SelectedInstanceType is reported by SageMaker, not sent to it [R20]"],
    "R21": [
        "StoppingCondition.MaxPendingTimeInSeconds must be 1800 to 2419200 seconds (30 min to 28 days), got 1799 "
        "[R21/R22]"
    ],
    "R22": [
        "StoppingCondition.MaxPendingTimeInSeconds must be 1800 to 2419200 seconds (30 min to 28 days), got 2419201 "
        "[R21/R22]"
    ],
    "R23": ["StoppingCondition.MaxPendingTimeInSeconds must be an integer, got 'soon' [R23]"],
    "R24": ["StoppingCondition.MaxWaitTimeInSeconds applies only to managed Spot training [R24]"],
    "missing-list": ["ResourceConfig.InstancePreferences is required: pass `preferences=` or put the list in config"],
    "job-name": ["TrainingJobName 'bad_name!' must be letters, digits and hyphens, starting with a letter or digit"],
}

PROCESSING_WORDS = {
    "P1": [
        "ProcessingResources.ClusterConfig.InstancePreferences: the preference list is empty; give 1 to 5 entries "
        "[R1/P1]"
    ],
    "P2": [
        "ProcessingResources.ClusterConfig.InstancePreferences: 6 preferences given; SageMaker accepts at most 5 [P2]"
    ],
    "P3": ["preference #1: InstanceType is required [R3/P3]"],
    "P4": ["preference #3 (ml.m5.xlarge): ml.m5.xlarge is already preference #1; each type may appear only once [P4]"],
    "P5": ["preference #2 (ml.c5.xlarge): InstanceCount must be set on every preference or on none [P5b]"],
    "P6": ["preference #1 (ml.m5.xlarge): InstanceCount must be at least 1, got 0 [P5]"],
    "P7": ["preference #1 (ml.m5.xlarge): InstanceCount must be at most 100, got 101 [P5]"],
    "P8": ["ClusterConfig.InstanceType cannot be combined with InstancePreferences [P8]"],
    "P9": ["preference #1 (ml.m5.xlarge): processing jobs cannot use training plans (TrainingPlanArns) [P9]"],
    "P10": [
        "StoppingCondition.MaxPendingTimeInSeconds does not exist for processing jobs; use the operator's "
        "`max_pending` to give up waiting for capacity [P10]"
    ],
    "P11": ["ProcessingResources.ClusterConfig.VolumeSizeInGB is required [P11]"],
    "P14": ["StoppingCondition needs MaxRuntimeInSeconds when present [P14]"],
}


def _problems(validate, request):
    with pytest.raises(RequestValidationError) as refused:
        validate(request)
    return refused.value.problems


@pytest.mark.parametrize(
    ("validate", "cases", "words"),
    [
        (validate_training_request, TRAINING_CASES, TRAINING_WORDS),
        (validate_processing_request, PROCESSING_CASES, PROCESSING_WORDS),
    ],
    ids=["training", "processing"],
)
def test_every_rules_case_is_refused_in_exactly_these_words(validate, cases, words):
    assert words.keys() == cases.keys(), "a case without its words, or words without a case"
    for case, (request, contained) in cases.items():
        problems = _problems(validate, request)
        assert problems == words[case], case
        assert contained in " ".join(problems), f"{case}: the campaign's text is part of the words"


def _with_an_entry(entry):
    request = training_with(P5)
    request["ResourceConfig"]["InstancePreferences"].append(entry)
    return request


TRAINING_MORE = {
    "a list that is not one": (
        training_request("job", None, InstancePreferences={"InstanceType": "ml.p5.48xlarge"}),
        ["ResourceConfig.InstancePreferences must be a list of preferences, got dict"],
    ),
    "an entry that is not a mapping": (
        _with_an_entry("ml.g5.xlarge"),
        [
            "preference #2: expected a mapping, got str",
            "preference #2: InstanceCount must be set on every preference or on none [R4b]",
        ],
    ),
    "an unknown field": (training_with({**P5, "Count": 2}), ["preference #1 (ml.p5.48xlarge): unknown field(s) Count"]),
    "spot as rendered text": (
        training_with(P5, top={"EnableManagedSpotTraining": " TRUE "}),
        ["EnableManagedSpotTraining=true cannot be combined with InstancePreferences [R9/R10]"],
    ),
    "spot as a number": (
        training_with(P5, top={"EnableManagedSpotTraining": 1}),
        ["EnableManagedSpotTraining must be true or false, got 1; and with InstancePreferences only false [R9/R10]"],
    ),
    "spot as other text": (
        training_with(P5, top={"EnableManagedSpotTraining": "yes"}),
        [
            "EnableManagedSpotTraining must be true or false, got 'yes'; and with InstancePreferences only false "
            "[R9/R10]"
        ],
    ),
    "a job-level count below one": (
        training_request("job", [{"InstanceType": "ml.p5.48xlarge"}], InstanceCount=0),
        ["job-level InstanceCount: InstanceCount must be at least 1, got 0 [R4]"],
    ),
    "integers out of their range": (
        training_with(P5, stopping={"MaxRuntimeInSeconds": 0}, VolumeSizeInGB=-1, KeepAlivePeriodInSeconds=21601),
        [
            "ResourceConfig.VolumeSizeInGB must be at least 0, got -1 [R26]",
            "ResourceConfig.KeepAlivePeriodInSeconds must be 0 to 21600, got 21601 [R26]",
            "StoppingCondition.MaxRuntimeInSeconds must be at least 1, got 0 [R26]",
        ],
    ),
    "an integer that is text": (
        training_with(P5, VolumeSizeInGB="big"),
        ["ResourceConfig.VolumeSizeInGB must be an integer, got 'big' [R26]"],
    ),
    "no resource mapping": (
        {**training_with(P5), "ResourceConfig": None},
        ["ResourceConfig must be a mapping, got NoneType"],
    ),
    "a stopping condition that is a list": (
        {**training_with(P5), "StoppingCondition": [1]},
        ["StoppingCondition must be a mapping, got list"],
    ),
    "a name one character too long": (
        training_with(P5, top={"TrainingJobName": "a" * 64}),
        [f"TrainingJobName is 64 characters long; SageMaker allows at most 63: {brief('a' * 64)}"],
    ),
    "a name that is not text": (
        training_with(P5, top={"TrainingJobName": 7}),
        ["TrainingJobName must be a string, got int"],
    ),
    "a job-level plan too short": (
        training_with(P5, TrainingPlanArn="arn:short"),
        ["training plan ARN 'arn:short' must be 50 to 2048 characters [R15/R16]"],
    ),
    "a pending bound that is a boolean": (
        training_with(P5, stopping={"MaxPendingTimeInSeconds": True}),
        ["StoppingCondition.MaxPendingTimeInSeconds must be an integer, got True [R23]"],
    ),
    "a selected count sent": (
        training_with(P5, SelectedInstanceCount=1),
        ["ResourceConfig.SelectedInstanceCount is reported by SageMaker, not sent to it [R20]"],
    ),
    "one plan ARN given as text, not a list": (
        training_with({**P5, "TrainingPlanArns": PLAN}),
        ["preference #1 (ml.p5.48xlarge): TrainingPlanArns must hold exactly one training plan ARN [R11]"],
    ),
    "a plan ARN of 49 characters": (
        training_with({**P5, "TrainingPlanArns": ["x" * 49]}),
        [f"preference #1 (ml.p5.48xlarge): training plan ARN {'x' * 49!r} must be 50 to 2048 characters [R15/R16]"],
    ),
    "a plan ARN of 2049 characters": (
        training_with({**P5, "TrainingPlanArns": ["x" * 2049]}),
        [f"preference #1 (ml.p5.48xlarge): training plan ARN {'x' * 2049!r} must be 50 to 2048 characters [R15/R16]"],
    ),
}

PROCESSING_MORE = {
    "integers out of their range": (
        processing_with(M5, stopping={"MaxRuntimeInSeconds": 777601}, VolumeSizeInGB=16385),
        [
            "ProcessingResources.ClusterConfig.VolumeSizeInGB must be 1 to 16384, got 16385 [P15]",
            "StoppingCondition.MaxRuntimeInSeconds must be 1 to 777600, got 777601 [P15]",
        ],
    ),
    "a cluster that is not a mapping": (
        {**processing_with(M5), "ProcessingResources": {"ClusterConfig": "x"}},
        ["ProcessingResources.ClusterConfig must be a mapping, got str"],
    ),
    "no list": (
        processing_request("job", None),
        [
            "ProcessingResources.ClusterConfig.InstancePreferences is required: pass `preferences=` or put the list "
            "in config"
        ],
    ),
    "a selected type sent": (
        processing_with(M5, SelectedInstanceType="ml.m5.xlarge"),
        ["ClusterConfig.SelectedInstanceType is reported by SageMaker, not sent to it"],
    ),
    "a selected count sent": (
        processing_with(M5, SelectedInstanceCount=1),
        ["ClusterConfig.SelectedInstanceCount is reported by SageMaker, not sent to it"],
    ),
    "a job-level count above a hundred": (
        processing_request("job", [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=101),
        ["job-level InstanceCount: InstanceCount must be at most 100, got 101 [P5]"],
    ),
    "a name starting with a hyphen": (
        {**processing_with(M5), "ProcessingJobName": "-lead"},
        ["ProcessingJobName '-lead' must be letters, digits and hyphens, starting with a letter or digit"],
    ),
}


@pytest.mark.parametrize("case", TRAINING_MORE)
def test_more_training_problems_in_exactly_these_words(case):
    request, words = TRAINING_MORE[case]
    assert _problems(validate_training_request, request) == words


@pytest.mark.parametrize("case", PROCESSING_MORE)
def test_more_processing_problems_in_exactly_these_words(case):
    request, words = PROCESSING_MORE[case]
    assert _problems(validate_processing_request, request) == words


def test_each_bound_is_accepted_at_its_edge():
    edges = training_with(
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        stopping={"MaxPendingTimeInSeconds": 1800, "MaxRuntimeInSeconds": 1},
        VolumeSizeInGB=0,
        KeepAlivePeriodInSeconds=21600,
    )
    edges["TrainingJobName"] = "a" * 63
    assert validate_training_request(edges) == []
    edges["StoppingCondition"]["MaxPendingTimeInSeconds"] = 2419200
    assert validate_training_request(edges) == []
    five = training_with(*[{"InstanceType": f"ml.g{i}.48xlarge", "InstanceCount": 1} for i in range(4, 9)])
    assert validate_training_request(five) == []
    hundred = processing_with(
        {"InstanceType": "ml.m5.xlarge", "InstanceCount": 100},
        {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
        stopping={"MaxRuntimeInSeconds": 777600},
        VolumeSizeInGB=16384,
    )
    assert validate_processing_request(hundred) == []
    hundred["ProcessingResources"]["ClusterConfig"]["VolumeSizeInGB"] = 1
    assert validate_processing_request(hundred) == []
    # 50 and 2048 characters are long enough: such a text is refused for its shape, not its length.
    for length in (50, 2048):
        (problem,) = _problems(validate_training_request, training_with({**P5, "TrainingPlanArns": ["x" * length]}))
        assert problem.endswith("is not a SageMaker training-plan ARN [R16]"), length


def test_templated_parts_wait_for_their_rendering():
    whole_list = training_request("job", None, InstancePreferences="{{ params.prefs }}")
    assert validate_training_request(whole_list) == []
    plans = training_with({**P5, "TrainingPlanArns": "{{ params.plans }}"}, G5, TrainingPlanArn="{{ params.plan }}")
    assert _problems(validate_training_request, plans) == [
        "ResourceConfig.TrainingPlanArn and per-preference TrainingPlanArns cannot both be set [R13]"
    ]
    one_plan = training_with({**P5, "TrainingPlanArns": ["{{ params.plan }}"]})
    assert validate_training_request(one_plan) == []
    rendered_later = training_with(
        P5,
        stopping={"MaxPendingTimeInSeconds": "{{ params.wait }}", "MaxRuntimeInSeconds": "{{ params.run }}"},
        top={"EnableManagedSpotTraining": "{{ params.spot }}", "TrainingJobName": "{{ params.name }}"},
        VolumeSizeInGB="{{ params.disk }}",
    )
    assert validate_training_request(rendered_later) == []
    assert (
        validate_processing_request(processing_with({"InstanceType": "ml.m5.xlarge", "InstanceCount": "{{ n }}"})) == []
    )


def test_a_pending_bound_on_a_cpu_only_list_warns_and_on_any_accelerated_entry_does_not():
    warning = (
        "MaxPendingTimeInSeconds has no effect: no preference is an accelerated type (ml.p*, ml.g*, ml.trn*), and "
        "SageMaker does not queue CPU-only lists; it fails them with a capacity error instead"
    )
    assert validate_training_request(training_with(M5, C5, stopping={"MaxPendingTimeInSeconds": 3600})) == [warning]
    trainium = {"InstanceType": "ml.trn1.32xlarge", "InstanceCount": 1}
    assert validate_training_request(training_with(M5, trainium, stopping={"MaxPendingTimeInSeconds": 3600})) == []
    unknown_yet = {"InstanceType": "{{ params.gpu }}", "InstanceCount": 1}
    assert validate_training_request(training_with(M5, unknown_yet, stopping={"MaxPendingTimeInSeconds": 3600})) == []
    assert validate_training_request(training_with(M5, C5)) == []
    assert validate_processing_request(processing_with(M5, C5)) == []


def test_accelerated_types_are_the_p_g_and_trn_families():
    assert [
        is_accelerated(t)
        for t in ("ml.p5.48xlarge", "ml.g6.xlarge", "ml.trn2.48xlarge", "ml.m5.xlarge", "ml.inf2.xlarge")
    ] == [
        True,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, None), (timedelta(hours=1), 3600), (1.9, 1), (1, 1), (366 * 86400, 366 * 86400)],
)
def test_a_duration_is_whole_seconds_within_a_year(value, seconds):
    assert duration_seconds(value, "max_pending") == seconds


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            "4h",
            "max_pending must be a timedelta or a number of seconds, got str '4h' (durations such as '4h' are not "
            "parsed: use timedelta(hours=4))",
        ),
        (True, "max_pending must be a timedelta or a number of seconds, got bool True"),
        ([60], "max_pending must be a timedelta or a number of seconds, got list [60]"),
        (0.5, "max_pending must be at least one second, got 0.5"),
        (timedelta(0), "max_pending must be at least one second, got datetime.timedelta(0)"),
        (math.inf, "max_pending must be at least one second, got inf"),
        (366 * 86400 + 1, "max_pending must be at most 31622400 seconds (one year)"),
    ],
)
def test_a_bad_duration_is_one_problem_naming_the_argument(value, problem):
    with pytest.raises(RequestValidationError) as refused:
        duration_seconds(value, "max_pending")
    assert refused.value.problems == [problem]


def test_an_interval_is_a_positive_finite_number():
    assert interval_seconds(2, "poll_interval") == 2.0 and isinstance(interval_seconds(2, "poll_interval"), float)
    assert interval_seconds(0.25, "poll_interval") == 0.25
    for bad in (0, -1, True, math.nan, math.inf, "2"):
        with pytest.raises(RequestValidationError) as refused:
            interval_seconds(bad, "poll_interval")
        assert refused.value.problems == [f"poll_interval must be a positive number of seconds, got {bad!r}"]


def test_a_quoted_value_is_cut_at_sixty_characters():
    assert brief("a" * 58) == repr("a" * 58)  # 60 with its quotes
    assert brief("a" * 59) == repr("a" * 59)[:57] + "..."
    assert len(brief("a" * 59)) == 60


def test_templated_is_judged_by_the_dags_own_markers():
    assert is_templated({"k": ["x", ("{{ y }}",)]}) and is_templated({"{% if %}": 1}) and is_templated("{# c #}")
    assert not is_templated({"k": ["x", 3, None]})
    with template_markers(("<<",)):
        assert is_templated("<< params.gpu >>") and not is_templated("{{ params.gpu }}")
    with template_markers(()):
        assert not is_templated("{{ params.gpu }}")
    assert is_templated("{{ params.gpu }}"), "the markers come back after the block"


def test_rendered_integers_are_cast_and_every_text_that_is_not_one_named():
    request = training_with(
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": "+3"},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2.0},
        stopping={"MaxPendingTimeInSeconds": "-1", "MaxRuntimeInSeconds": "{{ params.run }}"},
        VolumeSizeInGB=2.5,
    )
    cast = cast_integers(request, TRAINING.integer_paths)
    first, second = cast["ResourceConfig"]["InstancePreferences"]
    assert (first["InstanceCount"], second["InstanceCount"]) == (3, 2)
    assert type(second["InstanceCount"]) is int
    assert cast["StoppingCondition"] == {"MaxPendingTimeInSeconds": -1, "MaxRuntimeInSeconds": "{{ params.run }}"}
    assert cast["ResourceConfig"]["VolumeSizeInGB"] == 2.5, "a fraction is left for the rule to name"
    bad = training_with(
        P5,
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": "1e3"},
        stopping={"MaxPendingTimeInSeconds": "soon"},
    )
    with pytest.raises(RequestValidationError) as refused:
        cast_integers(bad, TRAINING.integer_paths)
    assert refused.value.problems == [
        "preference #2 (ml.g5.48xlarge): InstanceCount: expected an integer, got '1e3'",
        "StoppingCondition.MaxPendingTimeInSeconds: expected an integer, got 'soon'",
    ]
    not_a_list = training_request("job", None, InstancePreferences="{{ params.prefs }}")
    assert cast_integers(not_a_list, TRAINING.integer_paths) == not_a_list
    processing = processing_with({"InstanceType": "ml.m5.xlarge", "InstanceCount": " 7 "})
    (entry,) = cast_integers(processing, PROCESSING.integer_paths)["ProcessingResources"]["ClusterConfig"][
        "InstancePreferences"
    ]
    assert entry["InstanceCount"] == 7
