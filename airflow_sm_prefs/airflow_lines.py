"""What each supported Airflow line offers a task and its trigger, asked where the code depends on it.

- 3.3 has a task state store (``airflow.state``): a task's claim on its job outlives its tries and is read by the
  listener. Before it, the claim lives in the try's XCom and, for a later try, in SageMaker (see attempts).
- 3.3 calls a trigger's ``on_kill`` when a user ends its task; earlier lines only cancel the trigger.
- 3.2 made the triggerer's channel to its supervisor safe for requests made by triggers (reading a task's
  state, an XCom, a Variable). On 3.1 such requests beside the triggerer's own ended the triggerer ("Response
  read out of order"), so there a trigger of ours makes none it can do without (see the README's table).
"""

from __future__ import annotations

import functools
import importlib.util
from importlib.metadata import version

from packaging.version import Version


@functools.cache
def airflow_release() -> tuple[int, ...]:
    return Version(version("apache-airflow")).release


@functools.cache
def has_task_state_store() -> bool:
    return importlib.util.find_spec("airflow.state") is not None


def triggerer_calls_on_kill() -> bool:
    from airflow.triggers.base import BaseTrigger

    return hasattr(BaseTrigger, "on_kill")


def triggers_may_ask_the_supervisor() -> bool:
    return airflow_release() >= (3, 2)
