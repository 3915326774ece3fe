from __future__ import annotations

import pytest

from airflow_sm_prefs.emulator import ScenarioError, load
from airflow_sm_prefs.emulator.scenario import BUNDLED, parse


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_scenarios_load(name):
    assert load(name).name == name


def test_unknown_top_level_key_is_an_error():
    with pytest.raises(ScenarioError, match="capactiy"):
        parse({"capactiy": {"ml.p5.48xlarge": 1}})


def test_unknown_nested_key_is_an_error():
    with pytest.raises(ScenarioError, match="throttle"):
        parse({"faults": {"throttle": 0.5}})
    with pytest.raises(ScenarioError, match="events"):
        parse({"events": [{"at": 10, "capacity": {"ml.p5.48xlarge": 1}}]})


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"speed": 0}, "speed"),
        ({"faults": {"throttle_rate": 2}}, "throttle_rate"),
        ({"capacity": {"ml.p5.48xlarge": -1}}, "capacity"),
        ({"behaviour": {"pending_timeout_status": "Exploded"}}, "pending_timeout_status"),
    ],
)
def test_invalid_values_are_errors(raw, message):
    with pytest.raises(ScenarioError, match=message):
        parse(raw)


def test_unknown_scenario_name_lists_the_bundled_ones():
    with pytest.raises(ScenarioError, match="gpu-shortage"):
        load("no-such-scenario")
