from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from airflow_sm_prefs.emulator import EmulatorServer, load


@pytest.fixture
def start_emulator() -> Iterator[Callable[..., EmulatorServer]]:
    """Start an emulator on an ephemeral loopback port; every server is stopped after the test."""
    servers: list[EmulatorServer] = []

    def start(scenario: str = "ample", **kwargs: object) -> EmulatorServer:
        server = EmulatorServer(load(scenario), **kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
