"""The control surface: what tests, demos and the fault campaign use to steer the emulator.

Kept apart from the AWS API: it is served under ``/_emulator/`` to loopback clients only, and nothing
an AWS client sends can reach it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from airflow_sm_prefs.emulator import scenario as scenario_module
from airflow_sm_prefs.emulator.service import Emulator

CONTROL_PREFIX = "/_emulator/"


class UnknownRoute(LookupError):
    """No control route answers this method and path."""


def handle(emulator: Emulator, method: str, path: str, body: dict[str, Any]) -> Any:
    route = path[len(CONTROL_PREFIX) :].strip("/")
    engine = emulator.engine
    if method == "GET" and route == "health":
        return {"ok": True, "virtual_time": engine.clock.now(), "scenario": engine.scenario.name}
    if method == "GET" and route == "jobs":
        return {"jobs": engine.snapshot()}
    if method == "GET" and route == "calls":
        return {"calls": dict(engine.calls)}
    if method == "GET" and route == "capacity":
        with engine.lock:
            engine.advance()
            types = set(engine.scenario.capacity) | set(engine.capacity_override) | set(engine.held)
            return {t: {"capacity": engine.capacity(t), "free": engine.free(t)} for t in sorted(types)}
    if method == "POST" and route == "reset":
        scenario = scenario_module.load(body["scenario"]) if body.get("scenario") else None
        emulator.reset(scenario)
        return {"ok": True}
    if method == "POST" and route == "capacity":
        engine.set_capacity({str(k): int(v) for k, v in body.items()})
        emulator.save()
        return {"ok": True}
    if method == "POST" and route == "advance":
        with engine.lock:
            engine.clock.advance(float(body["seconds"]))
            engine.advance()
        emulator.save()
        return {"ok": True, "virtual_time": engine.clock.now()}
    if method == "POST" and route == "faults":
        emulator.faults = scenario_module.parse_faults(body, "POST /_emulator/faults")
        return {"ok": True, "faults": asdict(emulator.faults)}
    raise UnknownRoute(f"{method} {path}")
