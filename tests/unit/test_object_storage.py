"""Where each shared file lives: its own setting, else under ``[sm_prefs] storage``, else ``$AIRFLOW_HOME``."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_sm_prefs.evidence import ledger
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.storage import object_storage
from airflow_sm_prefs.storage.object_storage import StorageUnavailable


@pytest.fixture
def settings(monkeypatch, tmp_path):
    """No shared location and no per-file setting (the test session's scratch ledger and prices removed)."""
    for option in ("STORAGE", "STORAGE_CONN_ID", "LEDGER_PATH", "LEDGER_CONN_ID", "PRICE_TABLE"):
        monkeypatch.delenv(f"AIRFLOW__SM_PREFS__{option}", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))

    def configure(**options: str) -> None:
        for option, value in options.items():
            monkeypatch.setenv(f"AIRFLOW__SM_PREFS__{option.upper()}", value)

    return configure


def test_unset_everything_stays_under_airflow_home(settings, tmp_path):
    assert prices.user_table_path() == tmp_path / "home" / "sm_prefs" / "prices.json"
    assert ledger.location().path == str(tmp_path / "home" / "sm_prefs" / "ledger")


def test_a_shared_location_holds_the_ledger_and_the_price_table(settings):
    settings(storage="s3://team-bucket/sm-prefs/", storage_conn_id="shared_store")
    table, root = prices.user_table_path(), ledger.location()
    assert (str(table), table.conn_id) == ("s3://shared_store@team-bucket/sm-prefs/prices.json", "shared_store")
    assert (str(root), root.conn_id) == ("s3://shared_store@team-bucket/sm-prefs/ledger", "shared_store")


def test_a_files_own_setting_wins_with_its_own_connection(settings, tmp_path):
    settings(storage="s3://team-bucket/sm-prefs", storage_conn_id="shared_store")
    settings(
        ledger_path="s3://other-bucket/ledger", ledger_conn_id="ledger_store", price_table=str(tmp_path / "p.json")
    )
    assert prices.user_table_path() == tmp_path / "p.json"
    root = ledger.location()
    assert (str(root), root.conn_id) == ("s3://ledger_store@other-bucket/ledger", "ledger_store")
    settings(price_table="s3://rates/negotiated.json")
    assert prices.user_table_path().conn_id == "shared_store", "a URL of its own still reads on the storage connection"


def test_a_local_shared_location_is_a_folder(settings, tmp_path):
    settings(storage=f"file://{tmp_path}/shared")
    assert prices.user_table_path() == tmp_path / "shared" / "prices.json"
    assert ledger.location().path == str(tmp_path / "shared" / "ledger")


def test_a_shared_location_whose_filesystem_is_missing_names_the_setting_and_the_extra(settings, monkeypatch, caplog):
    import sys

    monkeypatch.setitem(sys.modules, "s3fs", None)
    settings(storage="s3://team-bucket/sm-prefs")
    with pytest.raises(StorageUnavailable) as raised:
        ledger.location()
    assert str(raised.value) == (
        "[sm_prefs] storage = s3://team-bucket/sm-prefs/ledger: the s3:// filesystem is not installed; "
        "pip install 'airflow-sm-prefs[s3]'"
    )
    assert prices.current().sources == prices.shipped().sources, "tasks go on with the shipped table"
    assert "Price table left out: [sm_prefs] storage = s3://team-bucket/sm-prefs/prices.json" in caplog.text


def test_an_unknown_scheme_is_refused_in_one_sentence(settings):
    settings(storage="gopher://example.invalid/x")
    with pytest.raises(StorageUnavailable, match=r"^\[sm_prefs\] storage = gopher://example.invalid/x/ledger: "):
        ledger.location()


def test_a_local_file_is_replaced_whole_and_its_version_changes(tmp_path):
    path = tmp_path / "folder" / "prices.json"
    object_storage.replace_whole(path, "one", prefix=".prices-")
    first = object_storage.version_of(path)
    object_storage.replace_whole(path, "two!", prefix=".prices-")
    assert path.read_text() == "two!" and object_storage.version_of(path) != first
    assert [p.name for p in path.parent.iterdir()] == ["prices.json"], "no temporary file left behind"
    assert isinstance(path, Path)
