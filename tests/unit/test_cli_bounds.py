"""The CLI as a hostile user drives it: every bad argument or setting is one line naming it and a non-zero
exit, never a traceback, and nothing reads or writes without bound (#27: the CLI's bounds)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from airflow_sm_prefs.surface import cli
from tests.helpers import plant_file


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse's own refusal
        code = exit_.code
    assert code == 2, argv
    error = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(error)
    return error[-1]


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--since", "999999999d"],
        ["report", "--since", "99999999999999999999d"],
        ["report", "--since", "３０d"],
        ["ledger", "compact", "--older-than", "999999999d"],
        ["ledger", "backfill", "--since", "999999999d"],
    ],
)
def test_a_duration_past_a_hundred_years_is_refused_naming_the_argument(capsys, argv):
    error = _one_line_error(capsys, argv)
    assert argv[-2] in error and "at most 36500d" in error


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["report", "--dag-id", ""], "--dag-id: an Airflow id"),  # an unset shell variable: not "every DAG"
        (["report", "--task-id", "fine tune"], "--task-id: an Airflow id"),
        (["advise", "--dag-id", "nightly", "--task-id", ""], "--task-id: an Airflow id"),
        (["advise", "--dag-id", "x" * 251, "--task-id", "t"], "--dag-id: an Airflow id"),
        (["plans", "advise", "--dag-id", "team/secret"], "--dag-id: an Airflow id"),
        (["prices", "show", "--region", ""], "--region: an AWS Region such as us-east-1"),
        (["prices", "show", "--region", "../x"], "--region: an AWS Region such as us-east-1"),
        (["weather", "--region", "US-EAST-1"], "--region: an AWS Region such as us-east-1"),
        (["ledger", "backfill", "--since", "1d", "--region", "us-east-1 "], "--region: an AWS Region"),
    ],
)
def test_a_name_that_cannot_be_one_is_refused_before_it_selects_nothing_or_everything(capsys, argv, named):
    assert named in _one_line_error(capsys, argv)


def test_prices_show_for_a_region_without_prices_names_it_and_the_refresh_for_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(tmp_path / "none.json"))
    assert cli.main(["prices", "show", "--region", "eu-north-9"]) == 0
    shown = capsys.readouterr().out.strip().splitlines()
    assert shown[-1] == (
        "No prices for eu-north-9: its costs are shown as unknown. Run `airflow-sm-prefs prices refresh --region "
        "eu-north-9`."
    )


@pytest.mark.parametrize(
    ("ledger_path", "named"),
    [
        ("gopher://example.invalid/ledger", "[sm_prefs] ledger_path"),
        ("s3://bucket/ledger", "[sm_prefs] ledger_path"),
    ],
)
def test_a_ledger_path_nothing_can_read_is_one_line(capsys, monkeypatch, ledger_path, named):
    """An unknown scheme, or s3:// where the S3 filesystem is not installed (what the `s3` extra adds)."""
    import sys

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", ledger_path)
    monkeypatch.setitem(sys.modules, "s3fs", None)
    for argv in (["report"], ["weather"], ["advise", "--dag-id", "d", "--task-id", "t"], ["ledger", "compact"]):
        error = _one_line_error(capsys, argv)
        assert error.startswith("airflow-sm-prefs: error:") and named in error, (argv, error)
        if ledger_path.startswith("s3://"):
            assert error.endswith("pip install 'airflow-sm-prefs[s3]'"), error


@pytest.mark.parametrize("kind", ["full", "zero", "fifo", "folder", "not a table"])
def test_prices_refresh_never_reads_or_replaces_what_is_not_a_price_table(tmp_path, capsys, kind):
    from airflow_sm_prefs.reference import price_list

    if kind == "full":
        output = Path("/dev/full")
    elif kind == "not a table":
        output = tmp_path / "prices.json"
        output.write_text("[1, 2, 3]")
    else:
        output = plant_file(tmp_path / "prices.json", {"zero": "device"}.get(kind, kind))
    retrieved = price_list.Retrieved(prices={"us-east-1": {"training": {"ml.p5.48xlarge": "1"}}})
    finished = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            price_list.write(retrieved, output, "http://127.0.0.1:1")
        except BaseException as error:  # handed to the test thread
            errors.append(error)
        finished.set()

    threading.Thread(target=write, daemon=True).start()
    assert finished.wait(20), "the write hung or kept reading"
    assert errors and "is not a price table" in str(errors[0])
    assert output.exists() or output.is_symlink(), "nothing was replaced"


def test_demo_refuses_a_project_dir_that_is_not_a_checkout(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("")
    error = _one_line_error(capsys, ["demo", "--project-dir", str(a_file)])
    assert "--project-dir" in error and "dags/" in error


@pytest.mark.parametrize("content", [b'{"format": 1, "source": "\xff"}', b"[" * 100_000, b"not json"])
def test_prices_show_names_a_bad_table_in_one_line(tmp_path, monkeypatch, capsys, content):
    table = tmp_path / "prices.json"
    table.write_bytes(content)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(table))
    error = _one_line_error(capsys, ["prices", "show"])
    assert "[sm_prefs] price_table" in error and str(table) in error


@pytest.mark.parametrize("command", ["emulator", "demo"])
def test_a_development_kit_command_without_the_kit_names_what_to_install(capsys, monkeypatch, command):
    """The runtime alone (its wheel holds no emulator): one line naming the kit, nothing started."""
    import importlib.metadata

    monkeypatch.setattr(cli, "_extensions", lambda: importlib.metadata.EntryPoints(()))
    error = _one_line_error(capsys, [command, "--help"])
    assert f"`airflow-sm-prefs {command}` comes with the development kit, airflow-sm-prefs-devkit" in error
    assert "pip install ./devkit" in error


def test_the_development_kit_adds_its_commands_by_entry_point():
    """Installed (as `make test` does), its commands are the entry points' names, loaded into the parser."""
    assert {"emulator", "demo"} <= set(cli._extensions().names)
    parsed = cli.build_parser().parse_args(["emulator", "--scenario", "gpu-shortage", "--port", "0"])
    assert parsed.command == "emulator" and parsed.scenario == "gpu-shortage" and parsed.port == 0


@pytest.mark.parametrize("output", ["s3://team-bucket/", "s3://team-bucket", "s3://team-bucket/prices/", "folder"])
def test_prices_refresh_to_a_folder_says_what_output_must_name_before_any_call(tmp_path, capsys, monkeypatch, output):
    from airflow.providers.amazon.aws.hooks import base_aws

    def no_call(*args, **kwargs):
        raise AssertionError("the AWS hook was built")

    monkeypatch.setattr(base_aws.AwsBaseHook, "__init__", no_call)
    given = str(tmp_path) if output == "folder" else output
    error = _one_line_error(capsys, ["prices", "refresh", "--output", given])
    assert error == (
        f"airflow-sm-prefs: error: --output {given} names a folder or a bucket; name the table's file, e.g. "
        f"{given.rstrip('/')}/prices.json"
    )


def test_prices_show_names_the_source_of_the_prices_it_shows(tmp_path, monkeypatch, capsys):
    """One source line per table whose prices are shown; the empty shipped table's line only when it is all."""
    import json

    from airflow_sm_prefs.reference import prices

    monkeypatch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(tmp_path / "prices.json"))
    assert cli.main(["prices", "show"]) == 0
    alone = [line for line in capsys.readouterr().out.splitlines() if line.startswith("source: ")]
    assert alone == [f"source: {s.source} (retrieved {s.retrieved or 'never'})" for s in prices.shipped().sources]
    table = {"format": 1, "currency": "USD", "unit": "instance-hour", "source": "team", "retrieved": "2026-12-01",
             "prices": {"us-east-1": {"training": {"ml.p5.48xlarge": "98.32"}}}}  # fmt: skip
    (tmp_path / "prices.json").write_text(json.dumps(table))
    assert cli.main(["prices", "show"]) == 0
    shown = capsys.readouterr().out.splitlines()
    expected = ["source: team (retrieved 2026-12-01)"]
    if prices.shipped().entries:  # a release built where the Price List API answered ships prices of its own
        expected = [f"source: {s.source} (retrieved {s.retrieved})" for s in prices.shipped().sources] + expected
    assert [line for line in shown if line.startswith("source: ")] == expected
