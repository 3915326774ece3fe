"""The emulator plays the service: it must not share the client's rules, or a shared bug would hide itself."""

from __future__ import annotations

import subprocess
import sys


def test_emulator_does_not_import_the_projects_validation():
    """Only the package root comes with it, and the root's botocore shapes: with a botocore older than the
    preference lists, the emulator checks requests against the same model SageMaker answers by."""
    code = (
        "import sys; from sm_prefs_devkit.emulator import EmulatorServer, load; "
        "server = EmulatorServer(load('ample')); server.stop(); "
        "print(sorted(m for m in sys.modules if m.startswith('airflow_sm_prefs') and 'emulator' not in m))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = "['airflow_sm_prefs', 'airflow_sm_prefs.sagemaker', 'airflow_sm_prefs.sagemaker.botocore_model', "
    loaded += "'airflow_sm_prefs.storage', 'airflow_sm_prefs.storage.paths']"
    assert result.stdout.strip() == loaded, result.stdout


def test_only_the_kind_table_knows_the_kinds():
    """Engine, responses, service and protocol read ``kinds.py``; a branch on a kind's name elsewhere fails."""
    import re
    from pathlib import Path

    import sm_prefs_devkit.emulator as package

    folder = Path(package.__file__).parent
    offenders = []
    for module in ("engine.py", "responses.py", "service.py", "protocol.py", "control.py", "server.py"):
        for number, line in enumerate((folder / module).read_text().splitlines(), start=1):
            if re.search(r"""["'](training|processing)["']|\b(TRAINING|PROCESSING)\b""", line):
                offenders.append(f"{module}:{number}: {line.strip()}")
    assert offenders == []


def test_every_error_class_answers_its_own_code():
    from sm_prefs_devkit.emulator import errors

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.ServiceError)]
    for cls in classes:
        if cls is errors.ServiceError:
            continue
        error = cls("why") if cls not in (errors.ThrottlingException, errors.InternalFailure) else cls()
        assert error.body()["__type"] == cls.__name__, cls
        assert error.status == (500 if cls is errors.InternalFailure else 400)
