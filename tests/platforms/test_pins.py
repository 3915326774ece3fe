"""The supported platforms' pins against the package's requirements, without installing anything.

`make test` installs each pin set (tools/platform_env); this fails first, and says which pin, when a
requirement in pyproject.toml would refuse a platform's own pinned version.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = sorted(path.name for path in (ROOT / "constraints" / "mwaa").iterdir() if path.is_dir())


def _pins(version: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for name in ("mwaa_essential_constraints.txt", "airflow_constraints.txt"):
        for line in (ROOT / "constraints" / "mwaa" / version / name).read_text().splitlines():
            found = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
            if found:
                pins.setdefault(canonicalize_name(found.group(1)), found.group(2))
    return pins


def _requirements(group: str, *extras: str) -> list[Requirement]:
    """The package's requirements with ``extras``, the development kit's and the dependency ``group``'s: what
    tools/platform_env installs beside the platform's pins."""
    from tools.dependency_group import requirements

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    devkit = tomllib.loads((ROOT / "devkit" / "pyproject.toml").read_text())["project"]
    listed = [*project["dependencies"], *devkit["dependencies"], *requirements(group)]
    for extra in extras:
        listed += project["optional-dependencies"][extra]
    return [Requirement(text) for text in listed if not text.startswith("airflow-sm-prefs")]


@pytest.mark.parametrize("version", PLATFORMS)
def test_every_requirement_admits_the_platforms_pinned_version(version):
    pins = _pins(version)
    refused = [
        f"{requirement} refuses {pins[name]} (MWAA {version} pins it)"
        for requirement in _requirements("platform-test", "s3", "openlineage")
        if (name := canonicalize_name(requirement.name)) in pins
        and not requirement.specifier.contains(pins[name], prereleases=True)
    ]
    assert refused == []
    for essential in ("apache-airflow", "apache-airflow-providers-amazon", "botocore", "boto3", "aiobotocore"):
        assert essential in pins, f"MWAA {version}'s constraints no longer pin {essential}: check the copy"


def test_a_newer_floor_is_caught():
    """The check itself: the floors this package had before the platforms were supported refuse them all."""
    pins = _pins("3.3.1")
    assert not Requirement("botocore>=1.43.90").specifier.contains(pins["botocore"])
    assert not Requirement("apache-airflow-providers-amazon>=9.39.0").specifier.contains(
        pins["apache-airflow-providers-amazon"]
    )


def test_each_platform_is_built_by_make_test_and_described_in_the_docs():
    makefile = (ROOT / "Makefile").read_text()
    built = re.search(r"^PLATFORMS := (.+)$", makefile, re.MULTILINE)
    assert built is not None and built.group(1).split() == [f"mwaa-{v}" for v in PLATFORMS]
    table = (ROOT / "docs" / "platforms.md").read_text()
    for version in PLATFORMS:
        pins = _pins(version)
        row = next(line for line in table.splitlines() if line.startswith(f"| MWAA {version} |"))
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        assert cells[1:4] == [pins["apache-airflow"], pins["apache-airflow-providers-amazon"], pins["botocore"]]
