"""Where benchmarks keep their scenario files and artifacts (run them as `python -m benchmarks.NAME`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_scenario(name: str, text: str) -> Path:
    """A scenario file kept beside the benchmark's artifacts, so a result can be traced to its settings."""
    path = ROOT / "artifacts" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
