"""Tags tying a job to its task instance: valid for SageMaker whatever the run id holds."""

from __future__ import annotations

import unicodedata

import botocore.session
from hypothesis import given
from hypothesis import strategies as st

from airflow_sm_prefs.sagemaker.tagging import MAX_TAGS, task_instance_tags, with_task_instance_tags

_MODEL = botocore.session.get_session().get_service_model("sagemaker")


def _valid_value(value: str) -> bool:
    # The model's Java classes \p{L} \p{Z} \p{N} are Unicode general categories L*, Z*, N*.
    return all(unicodedata.category(c)[0] in "LZN" or c in "_.:/=+-@" for c in value)


def test_the_value_alphabet_matches_the_service_model():
    assert _MODEL.shape_for("TagValue").metadata["pattern"] == "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)"


@given(st.text(min_size=1, max_size=400))
def test_any_run_id_becomes_a_valid_tag_value(run_id):
    value = task_instance_tags("dag", "task", run_id, 0)["airflow:run_id"]
    assert _valid_value(value)
    assert len(value) <= 256


def test_typical_run_ids_are_kept_as_they_are():
    for run_id in ("scheduled__2026-11-30T02:00:00+00:00", "manual__2026-11-30T03:55:07.123456+00:00"):
        assert task_instance_tags("d", "t", run_id, -1)["airflow:run_id"] == run_id
    assert task_instance_tags("d", "t", "a\tb#c", -1)["airflow:run_id"] == "a_b_c"


def test_user_tags_win_and_the_limit_holds():
    ours = task_instance_tags("dag", "task", "manual__x", -1)
    merged = with_task_instance_tags([{"Key": "airflow:dag_id", "Value": "mine"}], ours)
    assert merged[0] == {"Key": "airflow:dag_id", "Value": "mine"}
    assert [t["Key"] for t in merged[1:]] == ["airflow:task_id", "airflow:run_id", "airflow:map_index"]
    full = [{"Key": f"k{i}", "Value": "v"} for i in range(MAX_TAGS - 1)]
    assert len(with_task_instance_tags(full, ours)) == MAX_TAGS
