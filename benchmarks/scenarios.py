"""Where benchmarks keep their scenario files, artifacts and result tables (run them as `python -m benchmarks.NAME`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_scenario(name: str, text: str) -> Path:
    """A scenario file kept beside the benchmark's artifacts, so a result can be traced to its settings."""
    path = ROOT / "artifacts" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def publish(table: str, output: Path | None) -> None:
    """Print a result table, and keep it at ``output`` when given (docs/performance.md quotes these)."""
    print(table)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(table)
