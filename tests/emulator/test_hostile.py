"""The emulator as an untrusted peer: whatever a client sends, it answers with a clear error, changes nothing,
and keeps serving. Grown by class of input, not by example."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.emulator.protocol import MAX_BODY_BYTES, MAX_JSON_DEPTH
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, training_request

AWS_HEADERS = {"X-Amz-Target": "SageMaker.ListTrainingJobs", "Content-Type": "application/x-amz-json-1.1"}
CONTROL_HEADERS = {"Content-Type": "application/json"}


def _raw(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """One request exactly as given (no Content-Length added), answered on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    headers = {"Host": f"127.0.0.1:{port}", **headers}
    for key, value in headers.items():
        connection.putheader(key, value)
    connection.endheaders(body or None)
    response = connection.getresponse()
    payload = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, payload


def _still_serving(server: Any) -> None:
    assert control(server.endpoint_url, "health")["ok"] is True
    boto_client(server.endpoint_url).list_training_jobs()
    assert server.engine.jobs == {}, "a refused request must not create a job"


def _nested(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


BODIES = {
    # name: (headers beyond the route's, body, expected status)
    "a length of 10^12": ({"Content-Length": str(10**12)}, b"{}", 413),
    "one byte over the limit": ({"Content-Length": str(MAX_BODY_BYTES + 1)}, b"{}", 413),
    "a negative length": ({"Content-Length": "-5"}, b"{}", 400),
    "a length that is not a number": ({"Content-Length": "ten"}, b"{}", 400),
    "no length": ({}, b"", 411),
    "a chunked body": ({"Transfer-Encoding": "chunked"}, b"2\r\n{}\r\n0\r\n\r\n", 411),
    "arrays nested 100,000 deep": (None, b"[" * 100_000 + b"]" * 100_000, 400),
    "objects nested past the limit": (None, _nested(MAX_JSON_DEPTH + 1), 400),
    "not JSON": (None, b"{not json", 400),
    "NaN, which is not JSON": (None, b'{"VolumeSizeInGB": NaN}', 400),
    "Infinity, which is not JSON": (None, b'{"seconds": -Infinity}', 400),
    "JSON that is not an object": (None, b"[1, 2]", 400),
    "bytes that are not UTF-8": (None, b'{"a": "\xff\xfe"}', 400),
}


@pytest.mark.parametrize("route", ["aws", "control"])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_body_that_breaks_a_limit_is_refused_unread_and_the_server_keeps_serving(start_emulator, route, name):
    server = start_emulator()
    extra, body, status = BODIES[name]
    headers = dict(AWS_HEADERS if route == "aws" else CONTROL_HEADERS)
    headers.update(extra if extra is not None else {"Content-Length": str(len(body))})
    path = "/" if route == "aws" else "/_emulator/capacity"
    answered, payload = _raw(server.port, "POST", path, headers, body)
    assert answered == status, payload
    if route == "aws" and status == 400:
        assert payload["__type"] == "SerializationException"
    _still_serving(server)


def test_a_half_sent_request_does_not_hold_a_thread(start_emulator):
    server = start_emulator(request_timeout=0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as stalled:
        # Signed as an S3 client signs, so the request passes the checks on who may call and waits for its body.
        stalled.sendall(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=k/20261201/"
            b"us-east-1/s3/aws4_request\r\nContent-Length: 100\r\n\r\n{"
        )
        started = time.monotonic()
        assert stalled.recv(1024) == b"", "the server closes a connection that stops sending"
        assert time.monotonic() - started < 8
    _still_serving(server)


def test_a_put_whose_body_is_cut_short_stores_nothing(start_emulator):
    # As S3: the part that arrived is never stored under the checksum its headers announced (a proxy that closed
    # mid-request once left an empty object whose every later read failed its checksum).
    server = start_emulator(buckets={"cut-short": ()})
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as cut:
        cut.sendall(
            b"PUT /cut-short/entry.json HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=k/"
            b"20261201/us-east-1/s3/aws4_request\r\nx-amz-checksum-crc32: 5INupg==\r\nContent-Length: 100\r\n\r\n"
            + b"{"
            * 50
        )
        cut.shutdown(socket.SHUT_WR)
        assert cut.recv(1024) == b"", "no answer to a request that never arrived whole"
    s3 = boto_client(server.endpoint_url, service="s3")
    assert s3.list_objects_v2(Bucket="cut-short").get("KeyCount") == 0
    s3.put_object(Bucket="cut-short", Key="entry.json", Body=b"{}")
    assert s3.get_object(Bucket="cut-short", Key="entry.json")["Body"].read() == b"{}"


def test_unknown_operations_are_remembered_as_one_count_and_never_echoed_whole(start_emulator):
    server = start_emulator()

    def call(operation: str) -> tuple[int, dict[str, Any]]:
        headers = {**AWS_HEADERS, "X-Amz-Target": f"SageMaker.{operation}", "Content-Length": "2"}
        return _raw(server.port, "POST", "/", headers, b"{}")

    assert all(call(f"Made{index}Up")[0] == 400 for index in range(200))
    status, payload = call("X" * 10_000)
    assert status == 400
    assert payload["__type"] == "UnknownOperationException" and len(payload["message"]) < 500
    calls = control(server.endpoint_url, "calls")["calls"]
    assert len(calls) == 1 and sum(calls.values()) == 201


@pytest.mark.parametrize("operation", ["create", "describe", "stop"])
def test_an_oversized_value_is_refused_without_being_echoed(start_emulator, operation):
    server = start_emulator()
    client = boto_client(server.endpoint_url, validate=False)
    name = "n" * 100_000
    with pytest.raises(ClientError) as error:
        if operation == "create":
            client.create_training_job(**training_request(name, GPU_PAIR))
        elif operation == "describe":
            client.describe_training_job(TrainingJobName=name)
        else:
            client.stop_training_job(TrainingJobName=name)
    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert len(error.value.response["Error"]["Message"]) < 1_000
    _still_serving(server)


CONTROL_CALLS = {
    # name: (route, body)
    "negative capacity": ("capacity", {"ml.p5.48xlarge": -1}),
    "fractional capacity": ("capacity", {"ml.p5.48xlarge": 1.5}),
    "boolean capacity": ("capacity", {"ml.p5.48xlarge": True}),
    "capacity as text": ("capacity", {"ml.p5.48xlarge": "3"}),
    "NaN capacity": ("capacity", {"ml.p5.48xlarge": float("nan")}),
    "NaN seconds": ("advance", {"seconds": float("nan")}),
    "infinite seconds": ("advance", {"seconds": float("inf")}),
    "negative seconds": ("advance", {"seconds": -60}),
    "seconds as a word": ("advance", {"seconds": "soon"}),
    "boolean seconds": ("advance", {"seconds": True}),
    "no seconds": ("advance", {}),
    "a rate above one": ("faults", {"throttle_rate": 1.5}),
    "a NaN rate": ("faults", {"error_rate": float("nan")}),
    "rates adding past one": ("faults", {"throttle_rate": 0.8, "error_rate": 0.5}),
    "negative latency": ("faults", {"latency_ms": -1}),
    "deny as a string": ("faults", {"deny": "CreateTrainingJob"}),
    "slow operations as a list": ("faults", {"slow_operations": ["DescribeTrainingJob"]}),
    "an unknown fault": ("faults", {"throtle_rate": 0.5}),
    "a file path as scenario": ("reset", {"scenario": "/etc/passwd"}),
    "a relative path as scenario": ("reset", {"scenario": "../../etc/hostname"}),
    "a scenario that is not text": ("reset", {"scenario": ["ample"]}),
}


@pytest.mark.parametrize("name", sorted(CONTROL_CALLS))
def test_a_bad_control_call_is_refused_and_changes_nothing(start_emulator, name):
    server = start_emulator("gpu-shortage")
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("bystander", GPU_PAIR))
    before = (control(server.endpoint_url, "capacity"), control(server.endpoint_url, "jobs"))
    faults_before = server.emulator.faults
    route, body = CONTROL_CALLS[name]
    with pytest.raises(urllib.error.HTTPError) as error:
        control(server.endpoint_url, route, body)
    assert error.value.code == 400
    message = json.loads(error.value.read())["error"]
    assert "root:" not in message and len(message) < 1_000  # never a file's content, never a huge echo
    after = (control(server.endpoint_url, "capacity"), control(server.endpoint_url, "jobs"))
    assert after[0] == before[0] and [j["status"] for j in after[1]["jobs"]] == ["InProgress"]
    assert server.emulator.faults == faults_before
    assert client.describe_training_job(TrainingJobName="bystander")["TrainingJobStatus"] == "InProgress"


BROWSER_REQUESTS = {
    "an Origin header": ({"Origin": "https://evil.example"}, 403),
    "a non-JSON content type": ({"Content-Type": "text/plain"}, 415),
    "a form post": ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
    "a Host that is not loopback": ({"Host": "evil.example:8907"}, 403),
    "a rebinding Host with a loopback port": ({"Host": "127.0.0.1.evil.example"}, 403),
}


@pytest.mark.parametrize("name", sorted(BROWSER_REQUESTS))
def test_the_control_surface_refuses_what_a_web_page_could_send(start_emulator, name):
    server = start_emulator()
    changed, status = BROWSER_REQUESTS[name]
    body = json.dumps({"ml.p5.48xlarge": 7}).encode()
    headers = {**CONTROL_HEADERS, "Content-Length": str(len(body)), **changed}
    answered, _ = _raw(server.port, "POST", "/_emulator/capacity", headers, body)
    assert answered == status
    assert control(server.endpoint_url, "capacity").get("ml.p5.48xlarge", {}).get("capacity") != 7


def test_a_reset_may_name_a_bundled_scenario_or_the_file_the_emulator_started_with(start_emulator, tmp_path):
    scenario = tmp_path / "mine.yaml"
    scenario.write_text("name: mine\ndefault_capacity: 3\n")
    server = start_emulator(str(scenario), scenario_source=str(scenario))
    control(server.endpoint_url, "reset", {"scenario": "gpu-shortage"})
    assert control(server.endpoint_url, "health")["scenario"] == "gpu-shortage"
    control(server.endpoint_url, "reset", {"scenario": str(scenario)})
    assert control(server.endpoint_url, "health")["scenario"] == "mine"


def test_a_create_that_cannot_be_persisted_leaves_no_job_behind(start_emulator, tmp_path, monkeypatch):
    from sm_prefs_devkit.emulator import state_files

    server = start_emulator("ample", state_file=tmp_path / "state.json")
    client = boto_client(server.endpoint_url)

    def disk_full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(state_files.tempfile, "mkstemp", disk_full)
        with pytest.raises(ClientError) as error:
            client.create_training_job(**training_request("unrecorded", GPU_PAIR))
    assert error.value.response["Error"]["Code"] == "InternalFailure"
    assert server.engine.jobs == {}
    assert all(held == 0 for held in server.engine.held.values()), "its capacity was given back"
    # The client's retry creates the job: it does not meet ResourceInUse for a job it was told failed.
    client.create_training_job(**training_request("unrecorded", GPU_PAIR))
    assert [job["name"] for job in control(server.endpoint_url, "jobs")["jobs"]] == ["unrecorded"]
    assert "unrecorded" in (tmp_path / "state.json").read_text()
