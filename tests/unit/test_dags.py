"""The shipped DAGs parse cleanly, import nothing heavy, and have the shape the docs describe."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import IMPORT_DAGBAG, in_a_fresh_interpreter

ROOT = Path(__file__).resolve().parents[2]

PARSE = (
    """
import json, sys, time
import airflow.sdk
"""
    + IMPORT_DAGBAG
    + """
started = time.perf_counter()
bag = DagBag(sys.argv[1])
elapsed = time.perf_counter() - started
nightly = bag.dags["nightly_evaluation"]
print(json.dumps({
    "errors": {k: str(v)[-1500:] for k, v in bag.import_errors.items()},
    "dags": sorted(bag.dag_ids),
    "heavy": [m for m in ("boto3", "aiobotocore", "sm_prefs_devkit.emulator", "playwright") if m in sys.modules],
    "tasks": sorted(nightly.task_ids),
    "catchup": nightly.catchup,
    "schedule": getattr(nightly.timetable, "expression", None) or getattr(nightly.timetable, "_expression", None),
    "seconds": elapsed,
}))
"""
)


def _parse_in_a_fresh_process(script: str, folder: Path, home: Path, **env: str) -> dict:
    """Run ``script`` on ``folder`` in a clean interpreter (nothing imported yet); its last line as JSON."""
    return in_a_fresh_interpreter(script, home, str(folder), **env)


def _certify_nightly(home: Path) -> None:
    """What nightly_fine_tune_certification writes when the first two candidates pass."""
    from airflow_sm_prefs.preflight import certification
    from tests.unit.test_certification import certified

    certification.record(
        home / "sm_prefs" / "certified.yaml",
        "nightly-fine-tune",
        [certified("ml.p5.48xlarge", 1), certified("ml.p4d.24xlarge", 2)],
    )


def test_shipped_dags_parse_without_heavy_imports(tmp_path):
    _certify_nightly(tmp_path)
    parsed = _parse_in_a_fresh_process(PARSE, ROOT / "dags", tmp_path)
    assert parsed["errors"] == {}
    assert parsed["dags"] == [
        "fine_tune_new_way",
        "fine_tune_old_way",
        "nightly_evaluation",
        "nightly_fine_tune_certification",
        "team_b_pretraining",
    ]
    assert parsed["heavy"] == []
    assert parsed["tasks"] == [
        "evaluate",
        "fine_tune",
        "inspect_model",
        "plan_evaluation",
        "prepare_data",
        "write_summary",
    ]
    assert parsed["catchup"] is False and parsed["schedule"] == "0 2 * * *"
    print(f"parsed dags/ in {parsed['seconds']:.3f}s")


def test_the_nightly_dag_refuses_to_import_until_its_configurations_are_certified(tmp_path):
    script = PARSE.replace('nightly = bag.dags["nightly_evaluation"]', "nightly = next(iter(bag.dags.values()))")
    parsed = _parse_in_a_fresh_process(script, ROOT / "dags", tmp_path)
    (error,) = [text for path, text in parsed["errors"].items() if path.endswith("nightly_evaluation.py")]
    assert "preference #1 (1 x ml.p5.48xlarge): not certified for workload 'nightly-fine-tune'" in error
    assert "run the workload's certification first" in error
    assert "nightly_fine_tune_certification" in parsed["dags"]


def test_the_fault_campaign_dags_parse(tmp_path):
    """A broken campaign DAG would only show as a 2-minute timeout in the campaign; catch it here."""
    script = (
        "import json, sys\n" + IMPORT_DAGBAG + "bag = DagBag(sys.argv[1])\n"
        "print(json.dumps({'errors': {k: str(v)[:300] for k, v in bag.import_errors.items()}, 'n': len(bag.dags)}))\n"
    )
    parsed = _parse_in_a_fresh_process(script, ROOT / "tests" / "faults" / "dags", tmp_path, PYTHONPATH=str(ROOT))
    assert parsed["errors"] == {}
    assert parsed["n"] == 15
