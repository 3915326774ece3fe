"""The emulator as an untrusted peer on a developer's machine (#27, class 7): what a web page, a rebinding DNS
name or a careless client can make it do. Each refused request is answered at once and changes nothing."""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
from typing import Any

import pytest

from sm_prefs_devkit.emulator import EmulatorServer, load
from tests.helpers import GPU_PAIR, boto_client, training_request

pytestmark = pytest.mark.emulator

SIGNED = "AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=0"


def _send(server: Any, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.putrequest(method, path, skip_host="Host" in headers)
    for name, value in {"Content-Length": str(len(body)), **headers}.items():
        connection.putheader(name.replace("_", "-"), value)
    connection.endheaders(body)
    response = connection.getresponse()
    return response.status, response.read()


def _create(name: str) -> bytes:
    return json.dumps(training_request(name, GPU_PAIR)).encode()


def test_an_http_0_9_request_is_answered_at_once_not_held(start_emulator):
    server = start_emulator()  # the default 30 s request timeout
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
        client.sendall(b"GET /\r\n")
        started = time.monotonic()
        answer = client.recv(1024)
        assert time.monotonic() - started < 5, "answered or closed at once, not after the request timeout"
        assert answer.startswith(b"HTTP/1.1 505")


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Content-Type": "text/plain"},  # a page's "simple" cross-origin POST
        {"Origin": "http://evil.example", "Content-Type": "application/x-amz-json-1.1"},
        {"Content-Type": "text/plain"},
        {"Host": "evil.example:8907", "Content-Type": "application/x-amz-json-1.1"},  # DNS rebinding
    ],
)
def test_a_job_create_from_a_web_page_or_a_foreign_host_is_refused_and_creates_nothing(start_emulator, headers):
    server = start_emulator()
    status, _ = _send(
        server,
        "POST",
        "/",
        _create("from-a-page"),
        **{"X-Amz-Target": "SageMaker.CreateTrainingJob", "Authorization": SIGNED, **headers},
    )
    assert status in (403, 415)
    assert server.engine.jobs == {} and server.engine.calls["CreateTrainingJob"] == 0


def test_an_unsigned_or_cross_origin_s3_upload_is_refused(start_emulator):
    server = start_emulator("ample", buckets={"team": []})
    form = b"--b\r\nContent-Disposition: form-data; name=key\r\n\r\nplanted\r\n--b--\r\n"
    status, _ = _send(
        server,
        "POST",
        "/team",
        form,
        Origin="http://evil.example",
        **{"Content-Type": "multipart/form-data; boundary=b"},
    )
    assert status == 403
    assert _send(server, "PUT", "/team/planted", b"x")[0] == 403, "unsigned"
    assert boto_client(server.endpoint_url, service="s3").list_objects_v2(Bucket="team").get("KeyCount") == 0


def test_the_clients_still_work(start_emulator):
    server = start_emulator("ample", buckets={"team": []})
    boto_client(server.endpoint_url).create_training_job(**training_request("fine", GPU_PAIR))
    s3 = boto_client(server.endpoint_url, service="s3")
    s3.put_object(Bucket="team", Key="k", Body=b"v")
    assert s3.get_object(Bucket="team", Key="k")["Body"].read() == b"v"
    url = s3.generate_presigned_url("put_object", Params={"Bucket": "team", "Key": "presigned"})
    path = url.split(str(server.port), 1)[1]
    assert _send(server, "PUT", path, b"p")[0] == 200, "a presigned URL carries its signature in the query"


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("Logs_20140328.FilterLogEvents", {}),  # no logGroupName
        ("Logs_20140328.GetLogEvents", {"logGroupName": "/aws/sagemaker/TrainingJobs"}),  # no stream
    ],
)
def test_a_request_missing_a_field_is_a_400_not_a_500(start_emulator, target, body):
    server = start_emulator()
    status, reply = _send(
        server,
        "POST",
        "/",
        json.dumps(body).encode(),
        **{"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1", "Authorization": SIGNED},
    )
    assert status == 400, reply


def test_an_s3_parameter_that_is_not_a_number_is_a_400(start_emulator):
    server = start_emulator("ample", buckets={"team": []})
    status, _ = _send(server, "GET", "/team?list-type=2&max-keys=abc", Authorization=SIGNED)
    assert status == 400


def test_a_create_does_not_rewrite_the_s3_objects(tmp_path):
    state = tmp_path / "state.json"
    server = EmulatorServer(load("ample"), state_file=state).start()
    try:
        s3 = boto_client(server.endpoint_url, service="s3")
        s3.create_bucket(Bucket="big")
        s3.put_object(Bucket="big", Key="blob", Body=os.urandom(8 << 20))
        objects = state.with_name(state.name + ".s3")
        written = objects.stat().st_mtime_ns, objects.stat().st_ino
        client = boto_client(server.endpoint_url)
        for n in range(3):
            client.create_training_job(**training_request(f"job-{n}", GPU_PAIR))
        assert (objects.stat().st_mtime_ns, objects.stat().st_ino) == written, "the objects were not written again"
        assert state.stat().st_size < 1 << 20, "the jobs' state holds no object"
    finally:
        server.stop()
    resumed = EmulatorServer(load("ample"), state_file=state).start()
    try:
        body = boto_client(resumed.endpoint_url, service="s3").get_object(Bucket="big", Key="blob")["Body"].read()
        assert len(body) == 8 << 20
        assert resumed.engine.describe("training", "job-2")["TrainingJobName"] == "job-2"
    finally:
        resumed.stop()
