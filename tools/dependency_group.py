"""Print one of pyproject.toml's dependency groups (PEP 735), one requirement per line, its included groups
resolved: for a pip without ``--group`` (pip before 25.1, as the MWAA platforms' Python 3.12 venvs have).

    python tools/dependency_group.py platform-test
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def requirements(name: str, groups: dict[str, list[object]] | None = None) -> list[str]:
    """The group's requirements, each included group's in its place, in order."""
    groups = groups if groups is not None else tomllib.loads(PYPROJECT.read_text())["dependency-groups"]
    found: list[str] = []
    for item in groups[name]:
        if isinstance(item, dict):
            found += requirements(str(item["include-group"]), groups)
        else:
            found.append(str(item))
    return found


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1])))
