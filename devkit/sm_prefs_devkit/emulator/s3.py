"""S3 on the emulator's endpoint, served by moto's S3 backend (the emulator does not implement S3 itself).

With ``endpoint_url`` on an Airflow AWS connection every service goes to one endpoint, so the amazon
provider's ``HeadBucket`` and a downstream task's ``GetObject`` reach the emulator; requests that carry no
JSON target are S3 requests and go to moto. The engine uses the same store the way SageMaker uses S3: a
job's inputs must exist when it starts, and its outputs are written when it ends.

moto keeps its buckets in process-wide state keyed by account, and bucket names are unique across accounts
(as in S3), so every emulator in one process shares one S3; the last emulator to stop empties it. Requests
are served one at a time (moto's backends are not written for concurrent writers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sm_prefs_devkit.emulator.moto_store import MotoStore

# moto's partition of the commercial AWS Regions, and the host its S3 routes are written for.
PARTITION = "aws"
ROUTING_HOST = "s3.amazonaws.com"
# The largest object the emulator accepts in one request: enough for test data, small enough to stay up.
MAX_OBJECT_BYTES = 64 * 1024 * 1024

# (HTTP status, headers, body)
Reply = tuple[int, dict[str, str], bytes]


class S3Unavailable(RuntimeError):
    """moto is not installed: the emulator then serves SageMaker and CloudWatch Logs without S3."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        parts = urlsplit(uri)
        if parts.scheme != "s3" or not parts.netloc:
            raise ValueError(f"not an s3:// URI: {uri!r}")
        return cls(parts.netloc, parts.path.lstrip("/"))

    def child(self, name: str) -> S3Location:
        return S3Location(self.bucket, f"{self.key.rstrip('/')}/{name}" if self.key else name)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def _backend_dict() -> Any:
    try:
        from moto.s3.models import s3_backends
    except ImportError as error:  # an install without the emulator extra
        raise S3Unavailable("S3 needs moto: pip install 'moto[s3]'") from error
    return s3_backends


class ObjectStore(MotoStore):
    """One account's S3, as the emulator's clients and its jobs see it."""

    def __init__(self, account_id: str, region: str) -> None:
        _backend_dict()  # S3Unavailable now, rather than at the first request
        super().__init__()
        self.account_id = account_id
        self.region = region
        self._routes: list[tuple[Any, str]] | None = None  # moto's S3 URL patterns, compiled at the first request
        self._responder = _account_responder(account_id)

    # -- the wire -------------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one S3 request (``target`` is the request line's path and query) as moto's S3 would."""
        from botocore.awsrequest import AWSPreparedRequest
        from botocore.compat import HTTPHeaders
        from moto.core.request import normalize_request
        from werkzeug.exceptions import HTTPException  # what moto raises for an S3 error reply

        if self._routes is None:
            self._routes = _routes(self._backend())
        url = f"https://{ROUTING_HOST}{target}"
        path_only = url.split("?", 1)[0]
        request_headers = HTTPHeaders()
        for name, value in headers.items():
            request_headers[name] = value
        request = normalize_request(
            AWSPreparedRequest(method=method, url=url, headers=request_headers, body=body, stream_output=False)
        )
        with self.lock:
            for pattern, handler_name in self._routes:
                if pattern.match(path_only):
                    try:
                        status, reply_headers, reply = getattr(self._responder, handler_name)(
                            request, request.raw_url, request.headers
                        )
                    except HTTPException as error:
                        status, reply_headers, reply = error.code, dict(error.get_headers()), error.get_body()
                    break
            else:  # pragma: no cover - moto's routes match every path
                return 404, {}, b""
        data = reply.encode() if isinstance(reply, str) else bytes(reply or b"")
        if method in ("PUT", "POST", "DELETE") and int(status) < 300:
            self.version += 1
        return int(status), {str(k): str(v) for k, v in (reply_headers or {}).items()}, data

    # -- what the engine uses -------------------------------------------------------------------------------

    def _backend(self) -> Any:
        return _backend_dict()[self.account_id][PARTITION]

    def create_bucket(self, name: str) -> None:
        with self.lock:
            backend = self._backend()
            if name not in backend.buckets:
                backend.create_bucket(name, self.region)
                self.version += 1

    def bucket_exists(self, name: str) -> bool:
        with self.lock:
            return name in self._backend().buckets

    def put(self, location: S3Location, data: bytes) -> None:
        with self.lock:
            self._backend().put_object(location.bucket, location.key, data)
            self.version += 1

    def get(self, location: S3Location) -> bytes | None:
        with self.lock:
            bucket = self._backend().buckets.get(location.bucket)
            key = bucket.keys.get(location.key) if bucket is not None else None
            return None if key is None else bytes(key.value)

    def has_prefix(self, location: S3Location) -> bool:
        """Whether any object's key starts with the location's key (what an ``S3Prefix`` input needs)."""
        with self.lock:
            bucket = self._backend().buckets.get(location.bucket)
            return bucket is not None and any(k.startswith(location.key) for k in bucket.keys)

    # -- persistence ----------------------------------------------------------------------------------------

    def dump(self, saved: Set[str]) -> tuple[dict[str, dict[str, str]], dict[str, bytes]]:
        """Every bucket's objects by ETag (bucket -> key -> ETag), and the bodies of those whose ETag is not
        among ``saved``: what the emulator's files need to hold the store as it is now."""
        index: dict[str, dict[str, str]] = {}
        bodies: dict[str, bytes] = {}
        with self.lock:
            for name, bucket in self._backend().buckets.items():
                objects = index[name] = {}
                for key in bucket.keys:
                    stored = bucket.keys[key]
                    etag = objects[key] = stored.etag.strip('"')
                    if etag not in saved and etag not in bodies:
                        bodies[etag] = bytes(stored.value)
        return index, bodies

    def restore(self, saved: Mapping[str, Mapping[str, bytes]]) -> None:
        for bucket, objects in saved.items():
            self.create_bucket(bucket)
            for key, data in objects.items():
                self.put(S3Location(bucket, key), data)

    def seed(self, buckets: Mapping[str, Iterable[str]]) -> None:
        """Create the scenario's buckets, each with empty objects at the keys it lists."""
        for bucket, keys in buckets.items():
            self.create_bucket(bucket)
            for key in keys:
                if self.get(S3Location(bucket, key)) is None:
                    self.put(S3Location(bucket, key), b"")

    def _empty(self) -> None:
        self._backend().reset()


def _account_responder(account_id: str) -> Any:
    """moto's S3 request handler, answering for one account whatever access key signed the request."""
    from moto.s3.responses import S3Response

    class AccountS3Response(S3Response):  # type: ignore[misc]
        def get_current_account(self) -> str:
            return account_id

    return AccountS3Response


def _routes(backend: Any) -> list[tuple[Any, str]]:
    import re

    from moto.s3.responses import S3Response

    routes = []
    for pattern, handler in backend.urls.items():
        name = getattr(handler, "__name__", "")
        if hasattr(S3Response, name):
            routes.append((re.compile(pattern), name))
    return routes
