"""The emulator plays the service: it must not share the client's rules, or a shared bug would hide itself."""

from __future__ import annotations

import subprocess
import sys


def test_emulator_does_not_import_the_projects_validation():
    code = (
        "import sys; from airflow_sm_prefs.emulator import EmulatorServer, load; "
        "server = EmulatorServer(load('ample')); server.stop(); "
        "print(sorted(m for m in sys.modules if m.startswith('airflow_sm_prefs') and 'emulator' not in m))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['airflow_sm_prefs']", result.stdout
