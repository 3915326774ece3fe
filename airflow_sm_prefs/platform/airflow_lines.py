"""What each supported Airflow line offers a task and its trigger, asked where the code depends on it.

- 3.3 has a task state store (``airflow.state``): a task's claim on its job outlives its tries and is read by the
  listener. Before it, the claim lives in the try's XCom and, for a later try, in SageMaker (see attempts).
- 3.3 calls a trigger's ``on_kill`` when a user ends its task; earlier lines only cancel the trigger.
- Before 3.3 the triggerer's channel to its supervisor breaks when a trigger's request is cut in half by a
  cancellation; supervisor_calls makes every request so that none can be, on every line.
"""

from __future__ import annotations

import functools
import importlib.util


@functools.cache
def has_task_state_store() -> bool:
    return importlib.util.find_spec("airflow.state") is not None


def triggerer_calls_on_kill() -> bool:
    from airflow.triggers.base import BaseTrigger

    return hasattr(BaseTrigger, "on_kill")
