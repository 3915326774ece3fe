"""The built wheels, installed into a fresh virtualenv: Airflow discovers the provider; the runtime wheel holds
runtime code only (an allow-list), the development kit's wheel the emulator, the local stack and the demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.unit.test_layers import Layers

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


# Everything the runtime wheel may hold: the package's modules (in its subpackages), its data, its metadata.
RUNTIME_WHEEL_ALLOWS = [
    r"airflow_sm_prefs/__init__\.py",
    # The subpackages are the layers' contract's (pyproject.toml), named once: a new layer needs no edit here.
    rf"airflow_sm_prefs/({'|'.join(sorted(Layers.from_pyproject().subpackages()))})/[a-z_]+\.py",
    r"airflow_sm_prefs/py\.typed",
    # The Capacity page's views are Jinja templates (autoescaped HTML), shipped as package data.
    r"airflow_sm_prefs/surface/templates/[a-z_]+\.html",
    r"airflow_sm_prefs/data/(instances|prices)\.json",
    r"airflow_sm_prefs/data/botocore/sagemaker/\d{4}-\d{2}-\d{2}/service-2\.sdk-extras\.json",
    r"airflow_sm_prefs-[\d.]+\.dist-info/(METADATA|WHEEL|RECORD|entry_points\.txt|top_level\.txt|licenses/LICENSE)",
]


def _build(tmp_path_factory: pytest.TempPathFactory, project: Path, name: str) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # An sdist first, then the wheel from it, as a release is built: the wheel sees only what the sdist holds,
    # never a stale build/ folder of the checkout, and an sdist missing a file fails here.
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(project)])
    (built,) = out.glob(f"{name}-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory, ROOT, "airflow_sm_prefs")


@pytest.fixture(scope="module")
def devkit_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory, ROOT / "devkit", "airflow_sm_prefs_devkit")


def test_the_runtime_wheel_holds_only_what_its_allow_list_names(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    unexpected = [n for n in names if not any(re.fullmatch(allowed, n) for allowed in RUNTIME_WHEEL_ALLOWS)]
    assert unexpected == []
    shipped = {n for n in names if n.endswith(".py")}
    assert shipped == {p.relative_to(ROOT).as_posix() for p in (ROOT / "airflow_sm_prefs").rglob("*.py")}
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "airflow_sm_prefs/data/prices.json" in names


def test_the_runtime_wheel_publishes_only_the_extras_a_user_installs(wheel: Path):
    """Development dependencies are PEP 735 groups: the wheel's metadata names no test or lint tool."""
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    lines = archive.read(metadata).decode().splitlines()
    assert sorted(line.split(": ", 1)[1] for line in lines if line.startswith("Provides-Extra: ")) == [
        "openlineage",
        "s3",
    ]
    required = " ".join(line for line in lines if line.startswith("Requires-Dist: "))
    for tool in ("pytest", "mypy", "ruff", "playwright", "hypothesis", "awscli"):
        assert tool not in required, f"{tool} is published as a requirement of the runtime wheel"


def test_the_development_kit_wheel_holds_the_emulator_its_scenarios_and_the_demo(devkit_wheel: Path):
    names = zipfile.ZipFile(devkit_wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"sm_prefs_devkit"}
    for needed in ("emulator/engine.py", "emulator/scenarios/gpu-shortage.yaml", "local_stack.py", "demo.py"):
        assert f"sm_prefs_devkit/{needed}" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    modules = {Path(n).stem for n in names if n.endswith(".py")}
    assert not modules & {"conftest", "helpers", "stack", "audit", "test_campaign", "validation_cases"}


def test_a_fresh_virtualenv_with_the_wheel_discovers_the_provider(wheel: Path, devkit_wheel: Path, tmp_path: Path):
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
    # Without the development kit its commands say what to install; with it they are there.
    emulator = subprocess.run(
        [str(env_dir / "bin" / "airflow-sm-prefs"), "emulator", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert emulator.returncode == 2
    assert "airflow-sm-prefs-devkit, which is not installed here" in emulator.stderr
    _run([str(python), "-m", "pip", "install", "--quiet", str(devkit_wheel), "--constraint", str(constraints)])
    helps = _run([str(env_dir / "bin" / "airflow-sm-prefs"), "emulator", "--help"], cwd=tmp_path, env=env)
    assert "--scenario" in helps.stdout
    served = _run(
        [str(python), "-c", "from sm_prefs_devkit.emulator import load; print(load('ample').name)"],
        cwd=tmp_path,
        env=env,
    )
    assert served.stdout.strip() == "ample"
