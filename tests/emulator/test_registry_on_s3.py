"""The certification registry at ``<[sm_prefs] storage>/certified.yaml`` on the emulator's S3: concurrent
certification runs lose nothing (conditional writes), a malformed object is refused by name, and
``certified="strict"`` reads it before the job is created, never while the DAG file is parsed."""

from __future__ import annotations

import json
import threading

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_sm_prefs.preflight import certification
from airflow_sm_prefs.storage import object_storage
from tests.faulty_store import FaultyStore
from tests.helpers import boto_client
from tests.operators.test_operator import _creates, context, training_operator
from tests.unit.test_certification import certified

pytestmark = pytest.mark.emulator

KEY = "sm-prefs/certified.yaml"


@pytest.fixture
def shared(start_emulator, aws_connection, monkeypatch):
    server = start_emulator("ample", buckets={"team-bucket": ()})
    conn_id = aws_connection(server, "shared_store")
    monkeypatch.delenv("AIRFLOW__SM_PREFS__CERTIFICATION_REGISTRY", raising=False)
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE", "s3://team-bucket/sm-prefs")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", conn_id)
    return server, conn_id


def _certified_types(path: str) -> list[str]:
    return [c.instance_type for c in certification.read(path).get("eval", [])]


def test_the_registry_lives_on_the_shared_location(shared):
    server, _ = shared
    path = certification.registry_path(None)
    assert path == "s3://team-bucket/sm-prefs/certified.yaml"
    certification.record(path, "eval", [certified("ml.p5.48xlarge")])
    body = boto_client(server.endpoint_url, service="s3").get_object(Bucket="team-bucket", Key=KEY)["Body"].read()
    assert b"instance_type: ml.p5.48xlarge" in body
    assert _certified_types(path) == ["ml.p5.48xlarge"]


def test_a_writer_that_loses_the_race_reads_again_and_keeps_both(shared, monkeypatch):
    """Another certification run writes between this one's read and its write: this write is refused by its
    condition, and the retry merges into what the other run wrote."""
    path = certification.registry_path(None)
    certification.record(path, "eval", [certified("ml.p5.48xlarge")])
    real_write, interleaved = object_storage.write_if_unchanged, []

    def another_run_writes_first(location, data, version):
        if not interleaved:
            interleaved.append(version)
            _, text = certification._merged(certification.read(location), "eval", [certified("ml.g5.48xlarge")], "x")
            real_write(location, text.encode(), version)
        real_write(location, data, version)

    monkeypatch.setattr(object_storage, "write_if_unchanged", another_run_writes_first)
    certification.record(path, "eval", [certified("ml.p4d.24xlarge", 2)])
    assert sorted(_certified_types(path)) == ["ml.g5.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge"]
    assert interleaved and interleaved[0] is not None


def test_runs_certifying_at_once_lose_nothing(shared):
    path = certification.registry_path(None)
    types = [f"ml.g5.{size}xlarge" for size in (2, 4, 8, 12, 16, 24, 48)] + ["ml.p5.48xlarge"]
    errors: list[BaseException] = []

    def certify(instance_type: str) -> None:
        try:
            certification.record(path, "eval", [certified(instance_type)])
        except BaseException as error:  # handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=certify, args=(t,)) for t in types]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(_certified_types(path)) == sorted(types)


def test_a_malformed_registry_object_is_refused_naming_it_and_the_field(shared):
    server, _ = shared
    s3 = boto_client(server.endpoint_url, service="s3")
    s3.put_object(Bucket="team-bucket", Key=KEY, Body=b"format: 1\nworkloads:\n  eval:\n    - instance_type: 5\n")
    with pytest.raises(certification.RegistryError, match=r"team-bucket/sm-prefs/certified\.yaml, line 4: "):
        certification.read(certification.registry_path(None))


def test_strict_with_a_remote_registry_parses_offline_and_refuses_before_any_create(shared, monkeypatch):
    server, conn_id = shared
    certification.record(certification.registry_path(None), "eval", [certified("ml.p5.48xlarge")])

    def no_call_at_parse(*args, **kwargs):
        raise AssertionError("the registry was opened while the DAG was parsed")

    with monkeypatch.context() as parsing:
        parsing.setattr(object_storage, "open_root", no_call_at_parse)
        operator = training_operator(conn_id, workload="eval", certified="strict", deferrable=False)
    with pytest.raises(AirflowFailException, match=r"preference #2 \(2 x ml\.p4d\.24xlarge\): not certified"):
        operator.execute(context())
    assert _creates(server) == 0


@pytest.fixture
def failing_store(shared, monkeypatch):
    """The registry's store behind a proxy that never answers; SageMaker itself stays well."""
    server, conn_id = shared
    certification.record(certification.registry_path(None), "eval", [certified("ml.p5.48xlarge")])
    proxy = FaultyStore(server.endpoint_url.rstrip("/"))
    proxy.fault = "blackhole"
    extra = {"endpoint_url": proxy.endpoint_url, "region_name": "us-east-1"}
    connection = {"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_STALLED_STORE", json.dumps(connection))
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_CONN_ID", "stalled_store")
    monkeypatch.setenv("AIRFLOW__SM_PREFS__STORAGE_TIMEOUT", "2")
    yield server, conn_id
    proxy.stop()


def test_strict_with_a_registry_the_store_cannot_give_fails_the_try_and_creates_nothing(failing_store):
    server, conn_id = failing_store
    operator = training_operator(conn_id, workload="eval", certified="strict", deferrable=False)
    with pytest.raises(certification.RegistryUnreachable) as raised:
        operator.execute(context())
    said = str(raised.value)
    assert said.startswith("the store holding the certification registry s3://team-bucket/sm-prefs/certified.yaml "
                           "did not answer in time; "), said  # fmt: skip
    assert said.endswith("certified='strict' checks the list first, so no SageMaker job was created"), said
    assert not isinstance(raised.value, AirflowFailException), "a store's failure leaves the task its retries"
    assert _creates(server) == 0


def test_warn_with_a_registry_the_store_cannot_give_warns_and_runs_the_job(failing_store, task_log):
    server, conn_id = failing_store
    operator = training_operator(conn_id, workload="eval", certified="warn", deferrable=False)
    operator.execute(context())
    warnings = task_log.messages
    assert any(
        w.startswith("Certification not checked: the store holding the certification registry") for w in warnings
    )
    assert any(w.startswith("Certified run time left out: ") for w in warnings), "the finish reads it again"
    assert _creates(server) == 1
