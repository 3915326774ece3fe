"""S3 on the emulator's endpoint (moto's backend), and jobs that read and write it as SageMaker's do."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, processing_request, training_request

pytestmark = pytest.mark.emulator

LONG_ENOUGH = {"seconds": 10_000}  # past startup, download, the 300 s runtime and upload


def _with_input(request: dict, uri: str, data_type: str = "S3Prefix") -> dict:
    channel = {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3DataType": data_type, "S3Uri": uri}}}
    return {**request, "InputDataConfig": [channel]}


def _processing_with_io(name: str, input_uri: str, output_uri: str) -> dict:
    request = processing_request(name, [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1)
    request["ProcessingInputs"] = [
        {
            "InputName": "raw",
            "S3Input": {
                "S3Uri": input_uri,
                "LocalPath": "/opt/ml/processing/raw",
                "S3DataType": "S3Prefix",
                "S3InputMode": "File",
            },
        }
    ]
    request["ProcessingOutputConfig"] = {
        "Outputs": [
            {
                "OutputName": "shards",
                "S3Output": {"S3Uri": output_uri, "LocalPath": "/opt/ml/processing/out", "S3UploadMode": "EndOfJob"},
            }
        ]
    }
    return request


def test_s3_answers_on_the_same_endpoint_as_sagemaker(start_emulator):
    server = start_emulator("ample", buckets={"data": ("train/part-0",)})
    s3 = boto_client(server.endpoint_url, service="s3")
    assert {b["Name"] for b in s3.list_buckets()["Buckets"]} >= {"data", "bucket"}
    s3.head_bucket(Bucket="data")
    with pytest.raises(ClientError) as missing:
        s3.head_bucket(Bucket="no-such-bucket")
    assert missing.value.response["Error"]["Code"] == "404"
    s3.put_object(Bucket="data", Key="eval/one.jsonl", Body=b"{}")
    assert s3.get_object(Bucket="data", Key="eval/one.jsonl")["Body"].read() == b"{}"
    assert server.engine.calls["s3.PUT"] == 1
    assert not any(name.startswith(("Create", "Describe")) for name in server.engine.calls)


def test_the_deny_fault_refuses_s3_deletes_as_a_policy_would_and_nothing_else(start_emulator):
    server = start_emulator("ample", buckets={"data": ("keep/a", "keep/b")})
    s3 = boto_client(server.endpoint_url, service="s3")
    control(server.endpoint_url, "faults", {"deny": ["DeleteObject", "DeleteObjects"]})
    for delete in (
        lambda: s3.delete_object(Bucket="data", Key="keep/a"),
        lambda: s3.delete_objects(Bucket="data", Delete={"Objects": [{"Key": "keep/b"}]}),
    ):
        with pytest.raises(ClientError) as denied:
            delete()
        assert (
            denied.value.response["Error"]["Code"],
            denied.value.response["ResponseMetadata"]["HTTPStatusCode"],
        ) == (
            "AccessDenied",
            403,
        )
    s3.put_object(Bucket="data", Key="keep/c", Body=b"written")  # writes and reads are allowed
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="data")["Contents"]) == ["keep/a", "keep/b", "keep/c"]
    control(server.endpoint_url, "faults", {"deny": ["DeleteObjects"]})
    s3.delete_object(Bucket="data", Key="keep/a")  # only what is named is denied
    assert "keep/a" not in {o["Key"] for o in s3.list_objects_v2(Bucket="data")["Contents"]}


def test_a_training_job_whose_input_is_missing_fails_after_it_starts(start_emulator):
    server = start_emulator("ample", buckets={"data": ("train/2026-11-29/part-0",)})
    client = boto_client(server.endpoint_url)
    client.create_training_job(**_with_input(training_request("no-data", GPU_PAIR), "s3://data/train/2026-11-30"))
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    description = client.describe_training_job(TrainingJobName="no-data")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("ClientError: Data download failed: no object under ")
    assert "s3://data/train/2026-11-30" in description["FailureReason"]
    # The instances were given before the download failed: the job started, and SageMaker bills that time.
    assert description["TrainingStartTime"] <= description["TrainingEndTime"]
    assert [t["Status"] for t in description["SecondaryStatusTransitions"]][-2:] == ["Downloading", "Failed"]


def test_a_manifest_input_needs_that_very_object(start_emulator):
    server = start_emulator("ample", buckets={"data": ("manifests/train.manifest.old",)})
    client = boto_client(server.endpoint_url)
    request = _with_input(training_request("manifest", GPU_PAIR), "s3://data/manifests/train.manifest", "ManifestFile")
    client.create_training_job(**request)
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    description = client.describe_training_job(TrainingJobName="manifest")
    assert description["TrainingJobStatus"] == "Failed"
    assert "no object at s3://data/manifests/train.manifest" in description["FailureReason"]


def test_a_completed_training_job_leaves_its_model_where_describe_says(start_emulator):
    server = start_emulator("ample", buckets={"data": ("train/part-0",)})
    client = boto_client(server.endpoint_url)
    client.create_training_job(**_with_input(training_request("trained", GPU_PAIR), "s3://data/train"))
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    description = client.describe_training_job(TrainingJobName="trained")
    assert description["TrainingJobStatus"] == "Completed"
    artifact = description["ModelArtifacts"]["S3ModelArtifacts"]
    assert artifact == "s3://bucket/output/trained/output/model.tar.gz"
    body = (
        boto_client(server.endpoint_url, service="s3")
        .get_object(Bucket="bucket", Key="output/trained/output/model.tar.gz")["Body"]
        .read()
    )
    assert body[:2] == b"\x1f\x8b", "a gzip stream"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(body))) as archive:
        model = json.load(archive.extractfile("model.json"))  # type: ignore[arg-type]
    assert model["job_name"] == "trained"
    assert model["selected"]["instance_type"] == "ml.p5.48xlarge"


def test_a_training_job_whose_output_bucket_is_missing_fails_at_the_upload(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    request = training_request("nowhere", GPU_PAIR)
    request["OutputDataConfig"] = {"S3OutputPath": "s3://no-such-bucket/models"}
    client.create_training_job(**request)
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    description = client.describe_training_job(TrainingJobName="nowhere")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("ClientError: Artifact upload failed: the bucket 'no-such-bucket'")
    assert "Uploading" in [t["Status"] for t in description["SecondaryStatusTransitions"]]


def test_processing_reads_its_inputs_and_writes_each_output(start_emulator):
    server = start_emulator("ample", buckets={"lake": ("raw/2026-11-30/events.jsonl",)})
    client = boto_client(server.endpoint_url)
    client.create_processing_job(**_processing_with_io("prep", "s3://lake/raw/2026-11-30", "s3://lake/shards/x"))
    client.create_processing_job(**_processing_with_io("prep-missing", "s3://lake/raw/2026-12-01", "s3://lake/y"))
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    assert client.describe_processing_job(ProcessingJobName="prep")["ProcessingJobStatus"] == "Completed"
    s3 = boto_client(server.endpoint_url, service="s3")
    result = json.loads(s3.get_object(Bucket="lake", Key="shards/x/results.json")["Body"].read())
    assert (result["job_name"], result["output_name"]) == ("prep", "shards")
    missing = client.describe_processing_job(ProcessingJobName="prep-missing")
    assert missing["ProcessingJobStatus"] == "Failed"
    assert missing["FailureReason"].startswith("ClientError: Data download failed")
    assert "y/results.json" not in [o["Key"] for o in s3.list_objects_v2(Bucket="lake")["Contents"]]


def test_objects_survive_a_restart_with_the_state_file(start_emulator, tmp_path):
    state = tmp_path / "state.json"
    first = start_emulator("ample", state_file=state)
    boto_client(first.endpoint_url, service="s3").put_object(Bucket="bucket", Key="kept/one", Body=b"1")
    first.stop()
    second = start_emulator("ample", state_file=state)
    kept = boto_client(second.endpoint_url, service="s3").get_object(Bucket="bucket", Key="kept/one")
    assert kept["Body"].read() == b"1"


def _files(folder) -> dict[str, tuple[int, int]]:
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in folder.iterdir()}


def test_a_change_to_one_object_writes_its_body_and_the_index_only(start_emulator, tmp_path):
    """An S3 task log is rewritten at each upload in a bucket that grows all day: the other bodies stay as
    written, the replaced body goes, and the index names every object's body."""
    state = tmp_path / "state.json"
    server = start_emulator("ample", state_file=state)
    s3 = boto_client(server.endpoint_url, service="s3")
    for n in range(3):
        s3.put_object(Bucket="bucket", Key=f"logs/{n}", Body=f"line {n}\n".encode())
    bodies = tmp_path / "state.json.s3.d"
    before = _files(bodies)
    assert len(before) == 3
    s3.put_object(Bucket="bucket", Key="logs/2", Body=b"line 2\nline 3\n")  # what an appending log handler does
    after = _files(bodies)
    etag = s3.head_object(Bucket="bucket", Key="logs/2")["ETag"].strip('"')
    assert set(after) == set(before) - {s3_etag(b"line 2\n")} | {etag}
    assert {name: after[name] for name in set(before) & set(after)} == {
        name: before[name] for name in set(before) & set(after)
    }, "an unchanged body was written again"
    index = json.loads((tmp_path / "state.json.s3").read_text())
    assert index["format"] == 2 and index["buckets"]["bucket"]["logs/2"] == etag
    assert all(name in after for objects in index["buckets"].values() for name in objects.values())


def s3_etag(body: bytes) -> str:
    import hashlib

    return hashlib.md5(body).hexdigest()  # what S3 makes the ETag of a single-part upload


def test_objects_kept_in_the_earlier_layout_are_read(start_emulator, tmp_path):
    import base64

    state = tmp_path / "state.json"
    first = start_emulator("ample", state_file=state)
    first.stop()
    earlier = {"bucket": {"kept/one": base64.b64encode(b"from before").decode()}}
    (tmp_path / "state.json.s3").write_text(json.dumps(earlier))
    second = start_emulator("ample", state_file=state)
    kept = boto_client(second.endpoint_url, service="s3").get_object(Bucket="bucket", Key="kept/one")
    assert kept["Body"].read() == b"from before"


@pytest.mark.parametrize("body", ["../state.json", "/etc/passwd", "d41d8cd98f00b204e9800998ecf8427e"])
def test_an_index_naming_a_body_outside_its_folder_or_missing_stops_the_start(tmp_path, body):
    from sm_prefs_devkit.emulator.scenario import load
    from sm_prefs_devkit.emulator.service import Emulator, StateFileError

    state = tmp_path / "state.json"
    Emulator(load("ample"), state_file=state).close()
    (tmp_path / "state.json.s3").write_text(json.dumps({"format": 2, "buckets": {"bucket": {"key": body}}}))
    with pytest.raises(StateFileError, match="move it away"):
        Emulator(load("ample"), state_file=state)


def test_a_reset_empties_s3_and_seeds_the_scenario_again(start_emulator):
    server = start_emulator("ample")
    s3 = boto_client(server.endpoint_url, service="s3")
    s3.create_bucket(Bucket="scratch")
    control(server.endpoint_url, "reset", {})
    assert {b["Name"] for b in s3.list_buckets()["Buckets"]} == {"sm-prefs-demo", "bucket"}


def test_a_scenario_refuses_a_bucket_name_s3_would_refuse(tmp_path):
    from sm_prefs_devkit.emulator.scenario import ScenarioError, load

    scenario = tmp_path / "bad.yaml"
    scenario.write_text("buckets: {Not_A_Bucket: []}\n")
    with pytest.raises(ScenarioError, match="buckets"):
        load(str(scenario))


def test_an_oversized_or_chunked_upload_is_refused_unread(start_emulator):
    import http.client

    server = start_emulator("ample")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    signed = "AWS4-HMAC-SHA256 Credential=k/20261201/us-east-1/s3/aws4_request"  # as an S3 client signs
    connection.putrequest("PUT", "/bucket/huge")
    connection.putheader("Authorization", signed)
    connection.putheader("Content-Length", str(65 * 1024 * 1024))
    connection.endheaders()
    assert connection.getresponse().status == 413
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.putrequest("PUT", "/bucket/streamed")
    connection.putheader("Authorization", signed)
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    assert connection.getresponse().status == 411
    listed = boto_client(server.endpoint_url, service="s3").list_objects_v2(Bucket="bucket")
    assert listed["KeyCount"] == 0


def test_without_moto_s3_answers_501_and_jobs_touch_no_data(start_emulator):
    server = start_emulator("ample")
    store = server.emulator.s3
    server.emulator.s3 = server.engine.storage = None  # as when the emulator extra is not installed
    with pytest.raises(ClientError) as refused:
        boto_client(server.endpoint_url, service="s3").list_buckets()
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
    client = boto_client(server.endpoint_url)
    client.create_training_job(**_with_input(training_request("dataless", GPU_PAIR), "s3://nowhere/at/all"))
    control(server.endpoint_url, "advance", LONG_ENOUGH)
    assert client.describe_training_job(TrainingJobName="dataless")["TrainingJobStatus"] == "Completed"
    server.emulator.s3 = store  # closed with the server, like every store


def test_an_s3_failure_inside_the_emulator_answers_500_and_the_server_stays_up(start_emulator, monkeypatch):
    server = start_emulator("ample")

    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(server.emulator.s3, "handle", broken)
    s3 = boto_client(server.endpoint_url, service="s3")
    with pytest.raises(ClientError) as failed:
        s3.head_bucket(Bucket="bucket")
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    monkeypatch.undo()
    s3.head_bucket(Bucket="bucket")


def _answers(s3) -> list:
    """What a reader of many objects asks, as boto3 parses the answers (request ids and dates aside)."""
    answers = []
    for asked in (
        {},
        {"Prefix": "ledger/"},
        {"Prefix": "ledger/dag a/", "MaxKeys": 2},
        {"Prefix": "ledger/", "StartAfter": "ledger/dag a/job-1.json"},
        {"Prefix": "ledger/", "EncodingType": "url"},
        {"Prefix": "none/"},
        {"MaxKeys": 0},
    ):
        pages = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="data", **asked):
            contents = [
                {k: item[k] for k in ("Key", "ETag", "Size", "StorageClass")} for item in page.get("Contents", [])
            ]
            pages.append((contents, page["KeyCount"], page["IsTruncated"], page.get("Prefix"), page.get("MaxKeys")))
        answers.append(pages)
    for key in ("ledger/dag a/job-1.json", "ledger/100%/x.json", "ledger/é.json"):
        got = s3.get_object(Bucket="data", Key=key)
        answers.append(
            (
                got["Body"].read(),
                got["ETag"],
                got["ContentLength"],
                got["Metadata"],
                got.get("ContentType"),
                got.get("ChecksumCRC32"),
            )
        )
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket="data", Key="ledger/missing.json")
    answers.append(missing.value.response["Error"]["Code"])
    return answers


def test_the_quick_get_and_listing_answer_as_moto_does(start_emulator, monkeypatch):
    """A plain GetObject and a flat ListObjectsV2 are answered without moto's request machinery (a hundred
    thousand ledger objects are listed in seconds, not minutes); what a client parses from them is moto's."""
    from sm_prefs_devkit.emulator.s3 import ObjectStore

    server = start_emulator("ample", buckets={"data": ()})
    s3 = boto_client(server.endpoint_url, service="s3")
    for index in range(5):
        s3.put_object(Bucket="data", Key=f"ledger/dag a/job-{index}.json", Body=b"{}" * index)
    s3.put_object(Bucket="data", Key="ledger/100%/x.json", Body=b"odd", Metadata={"team": "ml"}, ContentType="text/x")
    s3.put_object(Bucket="data", Key="ledger/é.json", Body=b"accented")
    s3.put_object(Bucket="data", Key="other/z.json", Body=b"z")
    answered_quickly: list[str] = []

    def counted(name):
        original = getattr(ObjectStore, name)

        def answer(self, *args):
            reply = original(self, *args)
            if reply is not None:
                answered_quickly.append(name)
            return reply

        return answer

    for name in ("_listed", "_fetched"):
        monkeypatch.setattr(ObjectStore, name, counted(name))
    quick = _answers(s3)
    assert answered_quickly.count("_listed") >= 6 and answered_quickly.count("_fetched") == 3
    before = server.engine.calls["s3.GET"]
    monkeypatch.setattr(ObjectStore, "_listed", lambda *a: None)
    monkeypatch.setattr(ObjectStore, "_fetched", lambda *a: None)
    assert _answers(s3) == quick
    assert server.engine.calls["s3.GET"] == before + 4
    s3.put_object(Bucket="data", Key="ledger/dag a/job-9.json", Body=b"new")
    monkeypatch.undo()
    listed = s3.list_objects_v2(Bucket="data", Prefix="ledger/dag a/")["Contents"]
    assert listed[-1]["Key"] == "ledger/dag a/job-9.json", "a write is listed at once"
