"""What a job reads from S3 when it starts and writes when it ends, as SageMaker's jobs do.

A job whose input is absent fails shortly after it starts (SageMaker downloads inputs on the instances it
was given, so the capacity was already taken and billed); a job whose output bucket is absent fails at the
upload. The wording of both failures is the emulator's (``ClientError: ...`` is SageMaker's prefix for a
caller's mistake); docs/emulator.md, "Guesses", lists it.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sm_prefs_devkit.emulator.model import Job
from sm_prefs_devkit.emulator.s3 import S3Location

MODEL_ARCHIVE = "model.tar.gz"
PROCESSING_RESULT = "results.json"
# A fixed archive timestamp keeps the artifact of a given job byte-for-byte the same on every run.
ARCHIVE_MTIME = 0


class Storage(Protocol):
    def has_prefix(self, location: S3Location) -> bool: ...
    def get(self, location: S3Location) -> bytes | None: ...
    def bucket_exists(self, name: str) -> bool: ...
    def put(self, location: S3Location, data: bytes) -> None: ...


@dataclass(frozen=True)
class DataInput:
    name: str  # the training channel or processing input it comes from
    uri: str
    # S3Prefix: any object under the URI will do; ManifestFile and AugmentedManifestFile: that object.
    prefix: bool


@dataclass(frozen=True)
class DataOutput:
    name: str
    location: S3Location
    data: bytes


def missing_input(storage: Storage, inputs: list[DataInput]) -> str | None:
    """The failure reason of a job that cannot download an input, or None when every input is there."""
    for item in inputs:
        location = S3Location.parse(item.uri)
        found = storage.has_prefix(location) if item.prefix else storage.get(location) is not None
        if not found:
            what = "no object under" if item.prefix else "no object at"
            return (
                f"ClientError: Data download failed: {what} {item.uri} (input '{item.name}'). Check that the "
                "S3 URI exists and that the job's execution role can read it."
            )
    return None


def write_outputs(storage: Storage, outputs: list[DataOutput]) -> str | None:
    """Upload a finished job's outputs; the failure reason when a bucket is missing (then nothing is written)."""
    for output in outputs:
        if not storage.bucket_exists(output.location.bucket):
            return (
                f"ClientError: Artifact upload failed: the bucket '{output.location.bucket}' does not exist "
                f"(output '{output.name}', {output.location})."
            )
    for output in outputs:
        storage.put(output.location, output.data)
    return None


# -- per kind ------------------------------------------------------------------------------------------------


def _is_s3(uri: Any) -> bool:
    # The model also allows https:// URIs (S3 object URLs); the emulator models s3:// ones only.
    return isinstance(uri, str) and uri.startswith("s3://")


def _s3_data_type_is_prefix(data_type: Any) -> bool:
    return data_type in (None, "S3Prefix")


def training_inputs(request: dict[str, Any]) -> list[DataInput]:
    inputs = []
    for channel in request.get("InputDataConfig") or []:
        source = (channel.get("DataSource") or {}).get("S3DataSource")
        if source and _is_s3(source.get("S3Uri")):
            inputs.append(
                DataInput(channel["ChannelName"], source["S3Uri"], _s3_data_type_is_prefix(source.get("S3DataType")))
            )
    return inputs


def processing_inputs(request: dict[str, Any]) -> list[DataInput]:
    inputs = []
    for item in request.get("ProcessingInputs") or []:
        source = item.get("S3Input")
        if source and _is_s3(source.get("S3Uri")):
            inputs.append(
                DataInput(item["InputName"], source["S3Uri"], _s3_data_type_is_prefix(source.get("S3DataType")))
            )
    return inputs


def _summary(job: Job) -> dict[str, Any]:
    """What the emulated workload 'produced': enough for a downstream task to check it read the right job."""
    return {"job_name": job.name, "job_arn": job.arn, "selected": job.selected}


def model_artifact(job: Job) -> str:
    """Where SageMaker puts a training job's model: ``<S3OutputPath>/<job name>/output/model.tar.gz``."""
    output = job.request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    return f"{output}/{job.name}/output/{MODEL_ARCHIVE}"


def training_outputs(job: Job) -> list[DataOutput]:
    if not _is_s3(job.request["OutputDataConfig"]["S3OutputPath"]):
        return []
    payload = json.dumps(_summary(job), indent=2, sort_keys=True).encode()
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=ARCHIVE_MTIME) as zipped,
        tarfile.open(fileobj=zipped, mode="w") as archive,
    ):
        member = tarfile.TarInfo("model.json")
        member.size = len(payload)
        member.mtime = ARCHIVE_MTIME
        archive.addfile(member, io.BytesIO(payload))
    return [DataOutput("model", S3Location.parse(model_artifact(job)), buffer.getvalue())]


def processing_outputs(job: Job) -> list[DataOutput]:
    outputs = []
    for item in (job.request.get("ProcessingOutputConfig") or {}).get("Outputs") or []:
        target = item.get("S3Output")
        if target and _is_s3(target.get("S3Uri")):
            data = json.dumps({**_summary(job), "output_name": item["OutputName"]}, indent=2, sort_keys=True)
            location = S3Location.parse(target["S3Uri"]).child(PROCESSING_RESULT)
            outputs.append(DataOutput(item["OutputName"], location, data.encode()))
    return outputs


InputsOf = Callable[[dict[str, Any]], list[DataInput]]
OutputsOf = Callable[[Job], list[DataOutput]]
