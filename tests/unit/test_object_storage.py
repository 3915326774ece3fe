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
            if option.endswith("_conn_id"):  # a connection named must exist (tested below)
                monkeypatch.setenv(f"AIRFLOW_CONN_{value.upper()}", '{"conn_type": "aws"}')

    return configure


def test_unset_everything_stays_under_airflow_home(settings, tmp_path):
    assert prices.user_table_path() == tmp_path / "home" / "sm_prefs" / "prices.json"
    assert ledger.location().path == str(tmp_path / "home" / "sm_prefs" / "ledger")


def test_a_shared_location_holds_the_ledger_and_the_price_table(settings):
    settings(storage="s3://team-bucket/sm-prefs/", storage_conn_id="shared_store")
    table, root = prices.user_table_path(), ledger.location()
    assert (object_storage.shown(table), _conn_id(table)) == ("s3://team-bucket/sm-prefs/prices.json", "shared_store")
    assert (object_storage.shown(root), _conn_id(root)) == ("s3://team-bucket/sm-prefs/ledger", "shared_store")
    assert not object_storage.on_local_disk(root) and not object_storage.is_host_path(root)


def _conn_id(path) -> str | None:
    """The path's connection: an attribute from Airflow 3.2, one of its storage options on Airflow 3.1."""
    return getattr(path, "conn_id", None) or path.storage_options.get("conn_id")


def test_a_files_own_setting_wins_with_its_own_connection(settings, tmp_path):
    settings(storage="s3://team-bucket/sm-prefs", storage_conn_id="shared_store")
    settings(
        ledger_path="s3://other-bucket/ledger", ledger_conn_id="ledger_store", price_table=str(tmp_path / "p.json")
    )
    assert prices.user_table_path() == tmp_path / "p.json"
    root = ledger.location()
    assert (object_storage.shown(root), _conn_id(root)) == ("s3://other-bucket/ledger", "ledger_store")
    settings(price_table="s3://rates/negotiated.json")
    assert _conn_id(prices.user_table_path()) == "shared_store", (
        "a URL of its own still reads on the storage connection"
    )


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


@pytest.mark.parametrize(
    ("storage", "why"),
    [
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("s3:/team/x", r"not a URL \(s3:// takes two slashes\)"),
        ("s3:team", r"not a URL \(s3:// takes two slashes\)"),
        ("s3://Team_Bucket/x", "'Team_Bucket' is not a bucket's name"),
        ("s3://" + "b" * 70 + "/x", "is not a bucket's name"),
        ("s3://a..b/x", "is not a bucket's name"),
        ("s3://team-bucket\n/x", "control characters"),
        ("s3://team/x?versionId=1", r"a query \(\?\), a fragment \(#\) or a space"),
        ("s3://team/x#part", r"a query \(\?\), a fragment \(#\) or a space"),
        ("s3://team/x y", r"a query \(\?\), a fragment \(#\) or a space"),
        ("file://team/sm-prefs", "file:// takes an absolute path"),
        ("team/sm-prefs", "a relative path would land under whatever folder"),
        ("./sm-prefs", "a relative path would land under whatever folder"),
    ],
)
def test_a_storage_setting_that_names_no_usable_place_is_refused_naming_the_setting(settings, storage, why, tmp_path):
    import os

    settings(storage=storage)
    before = set(os.listdir(os.getcwd()))
    for where in (ledger.location, prices.user_table_path):
        with pytest.raises(object_storage.StorageSettingError, match=r"^\[sm_prefs\] storage = .*: .*" + why):
            where()
    assert set(os.listdir(os.getcwd())) == before, "nothing made under the working directory"


def test_a_files_own_setting_and_a_given_url_are_checked_the_same_way(settings):
    settings(ledger_path="s3://")
    with pytest.raises(object_storage.StorageSettingError, match=r"^\[sm_prefs\] ledger_path = 's3://': names no"):
        ledger.location()
    with pytest.raises(object_storage.StorageSettingError, match=r"^--output = 's3://': names no bucket"):
        object_storage.place("s3://", None, "--output")
    with pytest.raises(object_storage.StorageSettingError, match="spaces or control characters"):
        object_storage.place(" /srv/sm-prefs", None, "--output")
    with pytest.raises(object_storage.StorageSettingError, match="spaces or control characters"):
        object_storage.place("s3://team/\x1b[31mx", None, "--output")


def test_usable_places_pass(settings, tmp_path):
    for url in ("s3://team-bucket/sm-prefs", "s3://my.bucket-1", f"file://{tmp_path}", str(tmp_path), "~/sm-prefs"):
        assert object_storage.checked_url(url, "[sm_prefs] storage") == url


def test_a_connection_that_does_not_exist_is_refused_not_replaced_by_other_credentials(settings, monkeypatch):
    settings(storage="s3://team-bucket/sm-prefs")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", "no_such_connection")
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_CONNECTION", raising=False)
    with pytest.raises(object_storage.StorageSettingError, match="its connection 'no_such_connection' does not exist"):
        ledger.location()


def test_a_connection_found_is_not_looked_up_again_and_a_missing_one_is_looked_up_each_time(monkeypatch):
    """Each reading of the ledger opens its root: a found connection is kept for the process; a missing one is
    asked for again, so creating it is seen without a restart."""
    from airflow.sdk import BaseHook

    monkeypatch.setattr(object_storage, "_FOUND_CONNECTIONS", set())
    asked = []
    exists = {"team_store"}

    class AirflowNotFoundException(Exception):
        pass

    def get_connection(conn_id):
        asked.append(conn_id)
        if conn_id not in exists:
            raise AirflowNotFoundException(conn_id)
        return object()

    monkeypatch.setattr(BaseHook, "get_connection", get_connection)
    assert [object_storage._connection_exists("team_store") for _ in range(3)] == [True] * 3
    assert [object_storage._connection_exists("later") for _ in range(2)] == [False, False]
    exists.add("later")
    assert object_storage._connection_exists("later") and object_storage._connection_exists("later")
    assert asked == ["team_store", "later", "later", "later"]


def test_a_place_is_shown_as_its_setting_names_it_without_the_connection(settings, tmp_path):
    settings(storage="s3://team-bucket/sm-prefs", storage_conn_id="team_store")
    root = ledger.location()
    assert "team_store" in str(root), "what ObjectStoragePath prints, and why shown() exists"
    assert object_storage.shown(root) == "s3://team-bucket/sm-prefs/ledger"
    assert object_storage.shown(tmp_path / "ledger") == str(tmp_path / "ledger")


@pytest.mark.parametrize(
    ("timeout", "connect", "read"),
    [(None, 5.0, 15.0), ("10", 5.0, 5.0), ("4", 2.0, 2.0)],
    ids=["default-30", "10", "4"],
)
def test_each_s3_request_fits_the_deadline_and_the_connection_keeps_it(settings, monkeypatch, timeout, connect, read):
    """Two attempts of half the deadline each, a connect of at most 5 s, no retries of s3fs's own on top; and
    the filesystem ObjectStoragePath attaches for the connection is that one (it ignores storage options)."""
    from airflow.sdk import ObjectStoragePath

    settings(storage="s3://team-bucket/sm-prefs", storage_conn_id=f"bounded_{timeout}")
    if timeout is not None:
        monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", timeout)
    root = ledger.location()
    options = root.fs.config_kwargs
    assert (options["connect_timeout"], options["read_timeout"]) == (connect, read)
    # Room for a reader's concurrent GETs (botocore's default pool of 10 would queue them).
    assert options["max_pool_connections"] == 64
    assert options["retries"] == {"total_max_attempts": 2, "mode": "standard"}
    assert root.fs.retries == 1
    elsewhere = ObjectStoragePath("s3://team-bucket/other", conn_id=f"bounded_{timeout}")
    assert elsewhere.fs is root.fs, "every path of the connection in this process gets the same bounds"


def test_a_store_without_botocore_gets_no_s3_options(settings):
    assert object_storage._client_options("gs://team-bucket/sm-prefs") == {}
    assert object_storage._client_options("s3a://team-bucket/sm-prefs")["read_timeout"] == 15.0


class _PathWithAProtocol(type(Path())):  # what an ObjectStoragePath is on Airflow 3.1 (universal-pathlib 0.2)
    protocol = "s3"


def test_a_path_with_a_protocol_is_not_the_hosts_even_when_it_is_a_pathlib_path(tmp_path):
    assert object_storage.is_host_path(tmp_path) and object_storage.on_local_disk(tmp_path)
    on_s3 = _PathWithAProtocol("team-bucket/ledger")
    assert not object_storage.is_host_path(on_s3) and not object_storage.on_local_disk(on_s3)
