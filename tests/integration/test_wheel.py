"""The built wheel, installed into a fresh virtualenv: Airflow discovers the provider; no test code ships."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)])
    (built,) = out.glob("airflow_sm_prefs-*.whl")
    return built


def test_the_wheel_holds_the_package_and_its_license_and_no_test_code(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert {n for n in top_level if not n.endswith(".dist-info")} == {"airflow_sm_prefs"}
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "airflow_sm_prefs/emulator/scenarios/gpu-shortage.yaml" in names
    modules = {Path(n).stem for n in names if n.endswith(".py")}
    assert not modules & {"conftest", "helpers", "stack", "audit", "test_campaign", "validation_cases"}
    assert not [n for n in names if "/tests/" in n or n.startswith(("tests/", "benchmarks/", "dags/"))]


def test_a_fresh_virtualenv_with_the_wheel_discovers_the_provider(wheel: Path, tmp_path: Path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    constraints = ROOT / "constraints" / "py3.11.txt"
    _run([str(python), "-m", "pip", "install", "--quiet", str(wheel), "--constraint", str(constraints)])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH"))}
    env["AIRFLOW_HOME"] = str(tmp_path / "airflow")
    # Run outside the checkout, so its airflow_sm_prefs/ folder cannot stand in for the installed one.
    locate = "import airflow_sm_prefs; print(airflow_sm_prefs.__file__)"
    where = _run([str(python), "-c", locate], cwd=tmp_path, env=env)
    assert where.stdout.strip().startswith(str(env_dir))
    providers = _run([str(python), "-m", "airflow", "providers", "list", "-o", "json"], cwd=tmp_path, env=env)
    assert '"package_name": "airflow-sm-prefs"' in providers.stdout.replace("'", '"')
    plugins = _run([str(python), "-m", "airflow", "plugins", "-o", "json"], cwd=tmp_path, env=env)
    assert "sm_prefs" in plugins.stdout
