"""The failure-cause rules on real-looking FailureReason strings: each cause, and the rule each one matched."""

from __future__ import annotations

import pytest

from airflow_sm_prefs.facts import failure_cause

CASES = [
    # configuration: the caller's own mistake, whatever the text names
    ("ClientError: Artifact upload failed: the bucket 'bucket' does not exist", "configuration"),
    ("ClientError: Data download failed:Could not download s3://data/train/shard-0001: NoSuchKey", "configuration"),
    ("ClientError: Access Denied (403): the role cannot read s3://team/input", "configuration"),
    ("ClientError: Please ensure the input data is in the expected format: CSV header missing", "configuration"),
    (
        'ClientError: No S3 objects found under S3 URL "s3://sm-prefs-demo/shards" given in input data source',
        "configuration",
    ),
    ("ClientError: CUDA error mentioned in a hyperparameter the request got wrong", "configuration"),
    # hardware: the container's failure names the instance
    ("AlgorithmError: CUDA error: no kernel image is available for execution on the device (exit code 1)", "hardware"),
    ("AlgorithmError: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB", "hardware"),
    ("AlgorithmError: RuntimeError: CUDA error: an illegal memory access was encountered", "hardware"),
    (
        "AlgorithmError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1",
        "hardware",
    ),
    ("AlgorithmError: torch.distributed.DistBackendError: ncclSystemError: System call failed", "hardware"),
    (
        "AlgorithmError: NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current "
        "PyTorch installation",
        "hardware",
    ),
    ("AlgorithmError: RuntimeError: The NVIDIA driver on your system is too old", "hardware"),
    ("AlgorithmError: CUDA driver version is insufficient for CUDA runtime version", "hardware"),
    ("AlgorithmError: RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", "hardware"),
    (
        "AlgorithmError: RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)",
        "hardware",
    ),
    ("AlgorithmError: ExecuteUserScriptError: GPU has fallen off the bus", "hardware"),
    ("AlgorithmError: Xid 79 reported on GPU 3; uncorrectable ECC error", "hardware"),
    # code: the container's own failure
    (
        'AlgorithmError: ExecuteUserScriptError: Command "/usr/bin/python3 train.py" exit status 1: '
        "KeyError: 'label'",
        "code",
    ),
    ("AlgorithmError: See job logs for more information", "code"),
    ("Training job failed: the process exited with code 137", "code"),
    # capacity
    (
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using a different ML "
        "instance type.",
        "capacity",
    ),
    ("InsufficientInstanceCapacity: We currently do not have sufficient ml.p5.48xlarge capacity", "capacity"),
    # service
    ("InternalServerError: We encountered an internal error. Please try again.", "service"),
    ("We encountered an internal error.  Please try again.", "service"),
    # unknown
    ("", "unknown"),
    ("Something nobody wrote a rule for", "unknown"),
]


@pytest.mark.parametrize(("reason", "cause"), CASES, ids=[f"{c}-{n}" for n, (_, c) in enumerate(CASES)])
def test_each_reason_has_its_cause(reason, cause):
    assert failure_cause.diagnose(reason).cause == cause


def test_the_table_covers_every_cause_with_at_least_twenty_reasons():
    assert len(CASES) >= 20 and {cause for _, cause in CASES} == set(failure_cause.CAUSES)


def test_each_diagnosis_names_the_rule_it_matched():
    assert failure_cause.diagnose(CASES[7][0]).because == "GPU out of memory"
    assert failure_cause.diagnose(CASES[6][0]).because == "the GPU architecture or driver"
    assert failure_cause.diagnose(CASES[9][0]).because == "an NCCL or interconnect error"
    assert failure_cause.diagnose(None).because == "no failure reason given"
    assert failure_cause.diagnose("nonsense").because == "no rule matched the failure reason"


def test_a_job_that_never_got_a_configuration_failed_for_capacity_unless_the_request_was_refused():
    assert failure_cause.diagnose("AlgorithmError: anything", got_capacity=False).cause == "capacity"
    assert failure_cause.diagnose("ClientError: bad role", got_capacity=False).cause == "configuration"
    assert failure_cause.diagnose("InternalServerError: oops", got_capacity=False).cause == "service"


@pytest.mark.parametrize(
    ("outcome", "reason", "placed", "cause"),
    [
        ("completed", None, True, None),
        ("completed", "ClientError: ignored, the job completed", True, None),
        ("no_capacity", None, False, "capacity"),
        ("stopped", None, True, None),
        ("stopped", "ClientError: the role cannot be assumed", False, "configuration"),
        ("failed_after_start", None, True, "unknown"),
        ("failed_after_start", "AlgorithmError: CUDA error: x", True, "hardware"),
    ],
)
def test_an_entry_is_classified_from_its_outcome_and_reason(outcome, reason, placed, cause):
    entry = {"outcome": outcome, "failure_reason": reason, "selected_instance_type": "ml.g5.xlarge" if placed else None}
    assert failure_cause.of_entry(entry) == cause


def test_a_recorded_cause_stands_and_a_hostile_one_is_read_again():
    entry = {
        "outcome": "failed_after_start",
        "failure_reason": "AlgorithmError: CUDA error",
        "selected_instance_type": "t",
    }
    assert failure_cause.cause_of({**entry, "failure_cause": "code"}) == "code"
    assert failure_cause.cause_of({**entry, "failure_cause": "cosmic rays"}) == "hardware"
