"""What each supported Airflow line offers a trigger, asked where the code depends on it.

- 3.3 calls a trigger's ``on_kill`` when a user ends its task; earlier lines only cancel the trigger.
- 3.2 made the triggerer's channel to its supervisor safe for requests made by triggers (reading a task's
  state, an XCom, a Variable). On 3.1 such requests beside the triggerer's own ended the triggerer ("Response
  read out of order"), so there a trigger of ours makes none it can do without (see the README's table).
"""

from __future__ import annotations

import functools
from importlib.metadata import version

from packaging.version import Version


@functools.cache
def airflow_release() -> tuple[int, ...]:
    return Version(version("apache-airflow")).release


def triggerer_calls_on_kill() -> bool:
    from airflow.triggers.base import BaseTrigger

    return hasattr(BaseTrigger, "on_kill")


def triggers_may_ask_the_supervisor() -> bool:
    return airflow_release() >= (3, 2)
