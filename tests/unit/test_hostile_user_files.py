"""The files people edit (registry, price table, instance catalogue) as untrusted input: kinds of file x
readers, hostile values x fields. A bad file is refused naming the file (and the line where there is one), and
costs what it feeds: a cost estimate never fails a task."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from airflow_sm_prefs.facts import record
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.preflight import certification
from airflow_sm_prefs.preflight.certification import RegistryError
from airflow_sm_prefs.reference import instance_catalogue, prices
from airflow_sm_prefs.request.jobs import TRAINING
from airflow_sm_prefs.sagemaker.job_view import JobView
from tests.helpers import plant_file
from tests.unit.test_certification import certified
from tests.unit.test_record import training_description

ENTRY = """\
  - instance_type: ml.p5.48xlarge
    instance_count: 1
    run_seconds: 1800
    image_uri: image
    certified_at: 2026-11-30
    certified_by: run
"""


def _registry(path: Path, body: str) -> Path:
    path.write_text("format: 1\nworkloads:\n  nightly:\n" + body)
    return path


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            ("run_seconds: 1800", "run_seconds: .nan"),
            "line 6: workloads.nightly[0].run_seconds: must be a positive, finite",
        ),
        (("run_seconds: 1800", "run_seconds: .inf"), "run_seconds: must be a positive, finite number"),
        (("certified_at: 2026-11-30", "certified_at: 2026-13-45"), "line 8: '2026-13-45' is not a date"),
        (
            ("    certified_by: run", "    certified_by: run\n    run_seconds: 60"),
            "lines 6 and 10: 'run_seconds' is given twice",
        ),
    ],
)
def test_a_registry_value_that_cannot_be_right_is_refused_with_its_line(tmp_path, change, named):
    path = _registry(tmp_path / "certified.yaml", ENTRY.replace(*change))
    with pytest.raises(RegistryError) as refused:
        certification.read(path)
    assert str(refused.value).startswith(str(path)) and named in str(refused.value)


def test_a_workload_given_twice_is_refused_naming_both_lines(tmp_path):
    path = tmp_path / "certified.yaml"
    path.write_text("format: 1\nworkloads:\n  nightly:\n" + ENTRY + "  nightly:\n" + ENTRY)
    with pytest.raises(RegistryError, match="lines 3 and 10: 'nightly' is given twice"):
        certification.read(path)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "deep", "binary"])
def test_a_registry_that_is_not_a_readable_file_is_refused_not_hung(tmp_path, kind):
    path = plant_file(tmp_path / "certified.yaml", kind)
    with pytest.raises(RegistryError) as refused:
        certification.read(path)
    assert str(path) in str(refused.value)


def test_twenty_thousand_entries_are_read_whole(tmp_path):
    """At this size the quadratic duplicate check and the pure-Python YAML scanner took a minute; how long it
    takes now is measured by hand (see the session note), not asserted: timings here are noise."""
    path = tmp_path / "certified.yaml"
    _registry(path, "".join(ENTRY.replace("ml.p5.48xlarge", f"ml.t{n}.xlarge") for n in range(20_000)))
    assert len(certification.read(path)["nightly"]) == 20_000


def test_writing_through_a_symlinked_registry_keeps_the_link(tmp_path):
    target = tmp_path / "shared" / "certified.yaml"
    target.parent.mkdir()
    link = tmp_path / "certified.yaml"
    link.symlink_to(target)
    certification.record(link, "nightly", [certified("ml.p5.48xlarge")])
    assert link.is_symlink() and yaml.safe_load(target.read_text())["workloads"]["nightly"]


@pytest.fixture
def user_prices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "prices.json"
    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(path))
    return path


HOSTILE_FILES = {
    "a non-UTF-8 byte": b'{"format": 1, "source": "\xff"}',
    "100,000-deep JSON": b"[" * 100_000 + b"]" * 100_000,
    "NaN for a price": b'{"format": 1, "source": "s", "retrieved": null, "prices": {"us-east-1": {"training": '
    b'{"ml.p5.48xlarge": NaN}}}}',
    "not JSON": b"prices: yes",
}


@pytest.mark.parametrize("content", HOSTILE_FILES)
def test_a_bad_price_table_costs_the_estimate_never_the_task(user_prices, content, caplog):
    user_prices.write_bytes(HOSTILE_FILES[content])
    table = prices.current()
    assert table.sources == prices.shipped().sources, "the user's table is left out"
    assert str(user_prices) in caplog.text
    built = record.build(JobFacts.of(JobView.parse(TRAINING, training_description()), "us-east-1"))
    assert built["status"] == "Completed" and built["cost_basis"] in ("unknown-price", "on-demand")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_price_table_that_is_not_a_regular_file_is_left_out_not_hung(user_prices, kind):
    plant_file(user_prices, kind)
    assert prices.current().sources == prices.shipped().sources


@pytest.mark.parametrize("content", HOSTILE_FILES)
def test_a_bad_instance_catalogue_is_refused_naming_the_file(tmp_path, monkeypatch, content):
    path = tmp_path / "instances.json"
    path.write_bytes(HOSTILE_FILES[content])
    monkeypatch.setenv("AIRFLOW__SM_PREFS__INSTANCE_CATALOGUE", str(path))
    with pytest.raises(instance_catalogue.CatalogueError) as refused:
        instance_catalogue.current()
    assert str(path) in str(refused.value)


def test_a_registry_nested_past_the_limit_is_refused_before_it_is_composed(tmp_path):
    """Composing 100,000 levels recurses in C: Python 3.11 raised RecursionError, 3.12 (MWAA's) crashed the
    DAG processor. The event walk refuses it first; a legitimate registry stays well inside the limit."""
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * (certification.MAX_NESTING + 1) + "]" * (certification.MAX_NESTING + 1))
    with pytest.raises(RegistryError, match=f"nested more than {certification.MAX_NESTING} deep"):
        certification.read(deep)
    at_limit = tmp_path / "at-limit.yaml"
    at_limit.write_text("[" * certification.MAX_NESTING + "]" * certification.MAX_NESTING)
    with pytest.raises(RegistryError, match="expected a mapping with format"):
        certification.read(at_limit)
    assert certification.MAX_NESTING >= 5  # workloads > name > list > entry > preferences
