"""The control surface: what tests, demos and the fault campaign use to steer the emulator.

Kept apart from the AWS API: it is served under ``/_emulator/`` to loopback clients only, and nothing
an AWS client sends can reach it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sm_prefs_devkit.emulator import scenario as scenario_module
from sm_prefs_devkit.emulator.service import Emulator

CONTROL_PREFIX = "/_emulator/"


class UnknownRoute(LookupError):
    """No control route answers this method and path."""


def handle(emulator: Emulator, method: str, path: str, body: dict[str, Any]) -> Any:
    route = path[len(CONTROL_PREFIX) :].strip("/")
    engine = emulator.engine
    if method == "GET" and route == "health":
        # scenario_start: the virtual time the scenario's event times count from.
        return {
            "ok": True,
            "virtual_time": engine.clock.now(),
            "scenario_start": engine.clock.origin,
            "scenario": engine.scenario.name,
        }
    if method == "GET" and route == "jobs":
        return {"jobs": engine.snapshot()}
    if method == "GET" and route == "calls":
        return {"calls": dict(engine.calls)}
    if method == "GET" and route == "capacity":
        with engine.lock:
            engine.advance()
            types = set(engine.scenario.capacity) | set(engine.capacity_override) | set(engine.held)
            return {t: {"capacity": engine.capacity(t), "free": engine.free(t)} for t in sorted(types)}
    # Every value is checked before anything changes, so a bad call leaves the emulator as it was.
    if method == "POST" and route == "reset":
        emulator.reset(_scenario(emulator, body.get("scenario")))
        return {"ok": True}
    if method == "POST" and route == "capacity":
        capacity = scenario_module.validated(dict[scenario_module.Name, scenario_module.Count], body, route)
        engine.set_capacity(capacity)
        emulator.save()
        return {"ok": True}
    if method == "POST" and route == "advance":
        seconds = scenario_module.validated(scenario_module.Seconds, body["seconds"], f"{route}.seconds")
        with engine.lock:
            engine.clock.advance(seconds)
            engine.advance()
        emulator.save()
        return {"ok": True, "virtual_time": engine.clock.now()}
    if method == "POST" and route == "clock":
        # A client that must do several things at one virtual moment (the demo's advice, then its purchase)
        # stops the clock meanwhile, however busy the machine; ``advance`` still moves it.
        speed = scenario_module.validated(scenario_module.Speed, body["speed"], f"{route}.speed")
        with engine.lock:
            engine.advance()
            was = engine.clock.speed
            engine.clock.run_at(speed)
        return {"ok": True, "speed": speed, "was": was}
    if method == "POST" and route == "faults":
        emulator.faults = scenario_module.parse_faults(body, "POST /_emulator/faults")
        return {"ok": True, "faults": asdict(emulator.faults)}
    raise UnknownRoute(f"{method} {path}")


def _scenario(emulator: Emulator, requested: Any) -> scenario_module.Scenario | None:
    """A bundled scenario, or the file the emulator was started with: never another path a caller names."""
    if requested is None:
        return None
    allowed = set(scenario_module.BUNDLED) | ({emulator.scenario_source} if emulator.scenario_source else set())
    if not isinstance(requested, str) or requested not in allowed:
        raise ValueError(
            f"reset.scenario must be a bundled scenario ({', '.join(scenario_module.BUNDLED)}) or the scenario "
            "file this emulator was started with"
        )
    return scenario_module.load(requested)
