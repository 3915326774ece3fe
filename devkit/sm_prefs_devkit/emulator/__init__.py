"""A local SageMaker with a capacity model, spoken to over real HTTP (docs/emulator.md)."""

from sm_prefs_devkit.emulator.scenario import Scenario, ScenarioError, load
from sm_prefs_devkit.emulator.server import EmulatorServer

__all__ = ["EmulatorServer", "Scenario", "ScenarioError", "load"]
