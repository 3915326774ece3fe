from __future__ import annotations

import pytest

from sm_prefs_devkit.emulator import ScenarioError, load
from sm_prefs_devkit.emulator.scenario import BUNDLED, parse


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


def test_every_behaviour_setting_is_listed_with_its_guess_in_the_docs():
    """The emulator page's list of guesses stays complete: each setting that changes one is named there."""
    import dataclasses
    from pathlib import Path

    from sm_prefs_devkit.emulator.scenario import Behaviour

    page = (Path(__file__).resolve().parents[2] / "docs" / "emulator.md").read_text()
    guesses = page.split("**Guesses about the real service.**", 1)[1].split("\n\n", 2)[1]
    missing = [f.name for f in dataclasses.fields(Behaviour) if f"`{f.name}" not in guesses]
    assert not missing, f"behaviour settings missing from the guesses in docs/emulator.md: {missing}"
