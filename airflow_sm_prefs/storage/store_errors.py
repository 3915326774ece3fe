"""What a failure of the shared store means for the person who has to fix it: one line, what happened and what to
check, from whatever the clients raised (fsspec, s3fs, aiobotocore and botocore each wrap the others' errors,
and none of them names the setting or the fix).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import NamedTuple

from airflow_sm_prefs.storage.bounded import StoreTimedOut
from airflow_sm_prefs.storage.object_storage import StorageUnavailable


class StoreProblem(NamedTuple):
    what: str  # what happened, after "the store ..."
    check: str  # what to check
    setting: bool = False  # a setting's fault (exit 2), not the store's state (exit 1)

    def line(self, where: str) -> str:
        """The one line; ``where`` names the store (a problem that names its setting itself goes without)."""
        return f"{where} {self.what}; {self.check}" if self.check else self.what


_UNREACHABLE = {"EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError"}
_CUT_SHORT = {"ConnectionClosedError", "ClientPayloadError", "ContentLengthError", "IncompleteRead",
              "ResponseStreamingError", "ServerDisconnectedError", "ResponseParserError"}  # fmt: skip
# The bytes that arrived are not those the store said it sent (botocore checks the checksum S3 announces).
_CORRUPTED = {"FlexibleChecksumError", "ChecksumError"}
_SILENT = {"ReadTimeoutError", "FSTimeoutError", "ServerTimeoutError", "TimeoutError"}
_NO_CREDENTIALS = {"NoCredentialsError", "PartialCredentialsError"}
_DENIED_CODES = {"AccessDenied", "Forbidden", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}
_SERVER_CODES = {"InternalError", "500", "503", "ServiceUnavailable", "SlowDown", "502", "504"}
_MISSING_BUCKET_CODES = {"NoSuchBucket"}

CHECK_NETWORK = "check the endpoint in the store's connection, the network path to it and any proxy"
# The line names the store by the setting the user set (``where``); its connection is that setting's. Folding the
# ledger and returning its lease delete, so a role without s3:DeleteObject is refused there first.
CHECK_ACCESS = (
    "check the credentials of the store's connection and that its IAM policy allows s3:ListBucket, s3:GetObject, "
    "s3:PutObject and s3:DeleteObject on the prefix"
)
CHECK_BUCKET = "create the bucket (this package never creates one) or correct the URL"
CHECK_LATER = "the store is failing on its side: try again later, and check its health if it lasts"
CHECK_PATH = "check any proxy or gateway between here and the store, then try again"


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None


def explained(error: BaseException) -> StoreProblem | None:
    """What ``error`` says about the store, or None when it is not a failure of the store (a bug stays a bug).

    The whole chain is read: the outermost error is the most general (botocore's EndpointConnectionError wraps
    both a refused and a reset connection), the innermost the most precise."""
    chain = list(_chain(error))
    names = {type(cause).__name__ for cause in chain}
    codes = {code for cause in chain if (code := _code(cause)) is not None}
    for cause in chain:
        if isinstance(cause, StorageUnavailable) and not isinstance(cause, StoreTimedOut):
            return StoreProblem(str(cause), "", setting=True)  # a setting, or what it needs installed
    if names & _SILENT or any(isinstance(cause, (StoreTimedOut, TimeoutError)) for cause in chain):
        return StoreProblem("did not answer in time", CHECK_NETWORK)
    if names & _CUT_SHORT:
        return StoreProblem("cut its answer short", CHECK_PATH)
    if names & _CORRUPTED:
        return StoreProblem("sent an answer that did not match its checksum", CHECK_PATH)
    if any(isinstance(cause, ConnectionResetError) for cause in chain) and "ClientConnectorError" not in names:
        return StoreProblem("closed the connection without answering", CHECK_NETWORK)
    if names & _UNREACHABLE or any(isinstance(cause, ConnectionError) for cause in chain):
        return StoreProblem("could not be reached", CHECK_NETWORK)
    if names & _NO_CREDENTIALS:
        return StoreProblem("was asked with no credentials", CHECK_ACCESS)
    if codes & _MISSING_BUCKET_CODES:
        return StoreProblem("has no such bucket", CHECK_BUCKET)
    if codes & _DENIED_CODES or any(isinstance(cause, PermissionError) for cause in chain):
        return StoreProblem("refused access", CHECK_ACCESS)
    server_codes = sorted(codes & _SERVER_CODES)
    if server_codes or any(isinstance(cause, OSError) and cause.errno == errno.EREMOTEIO for cause in chain):
        said = server_codes[0] if server_codes else "EREMOTEIO"
        return StoreProblem(f"answered with a server error ({said})", CHECK_LATER)
    return None
