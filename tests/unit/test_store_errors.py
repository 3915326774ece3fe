"""What each failure of the shared store becomes in one line (storage/store_errors.py), from the errors the
clients really raise, wrapped as they wrap them; and what is not the store's failure stays unexplained."""

from __future__ import annotations

import errno
import itertools

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    FlexibleChecksumError,
    NoCredentialsError,
    ReadTimeoutError,
)

from airflow_sm_prefs.storage import store_errors
from airflow_sm_prefs.storage.bounded import StoreTimedOut
from airflow_sm_prefs.storage.object_storage import StorageSettingError

URL = "http://store.example:9000/team-bucket"


def wrapped(outer: BaseException, *inner: BaseException) -> BaseException:
    """``outer`` raised from ``inner[0]``, raised from ``inner[1]``..., as the client layers chain them."""
    chain = [outer, *inner]
    for upper, lower in itertools.pairwise(chain):
        upper.__cause__ = lower
    return outer


def client_error(code: str, operation: str = "GetObject") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


def s3fs_error(number: int, text: str, cause: BaseException) -> OSError:
    return wrapped(OSError(number, text), cause)  # type: ignore[return-value]


CASES = [
    (wrapped(EndpointConnectionError(endpoint_url=URL), ConnectionRefusedError(111, "refused")),
     "could not be reached", store_errors.CHECK_NETWORK),
    (wrapped(EndpointConnectionError(endpoint_url=URL), ConnectionResetError(104, "reset by peer")),
     "closed the connection without answering", store_errors.CHECK_NETWORK),
    (ReadTimeoutError(endpoint_url=URL), "did not answer in time", store_errors.CHECK_NETWORK),
    (StoreTimedOut("the ledger: no answer"), "did not answer in time", store_errors.CHECK_NETWORK),
    (ConnectionClosedError(endpoint_url=URL), "cut its answer short", store_errors.CHECK_PATH),
    (FlexibleChecksumError(error_msg="Expected checksum 5INupg== did not match calculated checksum: AAAAAA=="),
     "sent an answer that did not match its checksum", store_errors.CHECK_PATH),
    (NoCredentialsError(), "was asked with no credentials", store_errors.CHECK_ACCESS),
    (s3fs_error(errno.EACCES, "Forbidden", client_error("AccessDenied")), "refused access", store_errors.CHECK_ACCESS),
    (PermissionError(errno.EACCES, "denied"), "refused access", store_errors.CHECK_ACCESS),
    (s3fs_error(errno.ENOENT, "no bucket", client_error("NoSuchBucket", "ListObjectsV2")),
     "has no such bucket", store_errors.CHECK_BUCKET),
    (s3fs_error(errno.EREMOTEIO, "Internal Server Error", client_error("500", "HeadBucket")),
     "answered with a server error (500)", store_errors.CHECK_LATER),
    (s3fs_error(errno.EREMOTEIO, "Slow Down", client_error("SlowDown")),
     "answered with a server error (SlowDown)", store_errors.CHECK_LATER),
]  # fmt: skip


@pytest.mark.parametrize(("error", "what", "check"), CASES, ids=[case[1] for case in CASES])
def test_each_failure_is_said_with_what_to_check(error, what, check):
    problem = store_errors.explained(error)
    assert problem is not None
    assert (problem.what, problem.check, problem.setting) == (what, check, False)
    assert problem.line("the shared store (s3://b/p)") == f"the shared store (s3://b/p) {what}; {check}"


def test_a_setting_says_itself_and_is_a_settings_fault():
    problem = store_errors.explained(wrapped(OSError("listing failed"), StorageSettingError("[sm_prefs] storage = x")))
    assert problem == store_errors.StoreProblem("[sm_prefs] storage = x", "", setting=True)
    assert problem.line("the shared store") == "[sm_prefs] storage = x"


def test_a_timeout_is_the_stores_state_not_a_setting():
    problem = store_errors.explained(StoreTimedOut("no answer"))  # a StorageUnavailable, but not a setting's
    assert problem is not None and problem.setting is False


@pytest.mark.parametrize(
    "error",
    [ValueError("bad JSON"), KeyError("job_name"), OSError(errno.ENOSPC, "disk full"), client_error("ValidationError")],
    ids=["value", "key", "local-disk", "other-code"],
)
def test_what_is_not_the_stores_failure_stays_unexplained(error):
    assert store_errors.explained(error) is None


def test_a_chain_that_loops_ends():
    first, second = OSError("a"), OSError("b")
    first.__cause__, second.__cause__ = second, first
    assert store_errors.explained(first) is None
