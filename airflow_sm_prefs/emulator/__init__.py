"""A local SageMaker with a capacity model, spoken to over real HTTP (docs/emulator.md)."""

from airflow_sm_prefs.emulator.scenario import Scenario, ScenarioError, load
from airflow_sm_prefs.emulator.server import EmulatorServer

__all__ = ["EmulatorServer", "Scenario", "ScenarioError", "load"]
