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

import base64
import bisect
import itertools
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

from sm_prefs_devkit.emulator.moto_store import MotoStore

# moto's partition of the commercial AWS Regions, and the host its S3 routes are written for.
PARTITION = "aws"
ROUTING_HOST = "s3.amazonaws.com"
# The largest object the emulator accepts in one request: enough for test data, small enough to stay up.
MAX_OBJECT_BYTES = 64 * 1024 * 1024

# Request headers that make a GET more than "the whole object, now": such requests are moto's to answer.
_LEFT_TO_MOTO = frozenset(
    {
        "range",
        "if-match",
        "if-none-match",
        "if-modified-since",
        "if-unmodified-since",
        "origin",
        "x-amz-server-side-encryption-customer-algorithm",
        "x-amz-expected-bucket-owner",
        "x-amz-request-payer",
    }
)

# (HTTP status, headers, body)
Reply = tuple[int, dict[str, str], bytes]


def delete_operation(method: str, target: str) -> str | None:
    """The S3 operation a request deletes with (``DeleteObject``, ``DeleteObjects``), else None: the ones the
    ``deny`` fault can name, as a role that may write a prefix but not delete in it is denied them."""
    path, _, query = target.partition("?")
    if method == "DELETE" and "/" in path.strip("/"):
        return "DeleteObject"
    if method == "POST" and "delete" in dict(parse_qsl(query, keep_blank_values=True)):
        return "DeleteObjects"
    return None


def access_denied(operation: str) -> Reply:
    """S3's answer to a request its caller's policy does not allow (S3 names no operation in it)."""
    body = (
        "<?xml version='1.0' encoding='UTF-8'?><Error><Code>AccessDenied</Code>"
        f"<Message>Access Denied</Message><RequestId>denied-{operation}</RequestId></Error>"
    )
    return 403, {"Content-Type": "application/xml"}, body.encode()


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
        self._sorted: dict[str, tuple[int, list[str]]] = {}

    # -- the wire -------------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one S3 request (``target`` is the request line's path and query) as moto's S3 would."""
        from botocore.awsrequest import AWSPreparedRequest
        from botocore.compat import HTTPHeaders
        from moto.core.request import normalize_request
        from werkzeug.exceptions import HTTPException  # what moto raises for an S3 error reply

        with self.lock:
            quick = self._listed(target, headers) if method == "GET" else None
            quick = quick or (self._fetched(target, headers) if method == "GET" else None)
        if quick is not None:
            return quick
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
            if method in ("PUT", "POST", "DELETE") and int(status) < 300:
                self.version += 1  # under the lock: a listing never sorts the keys of a write it then calls older
        data = reply.encode() if isinstance(reply, str) else bytes(reply or b"")
        return int(status), {str(k): str(v) for k, v in (reply_headers or {}).items()}, data

    # -- the two requests a reader of many objects makes, answered without moto's request machinery ---------
    # moto parses, dispatches and serializes every request through its generic layers: about 2 ms a GET and
    # 0.7 s a page of a thousand keys, so listing a hundred thousand objects took minutes. A plain GetObject and
    # a flat ListObjectsV2 page are answered here from moto's own objects; anything else (ranges, conditions,
    # versions, delimiters, encryption with a customer key, archived objects) still goes to moto.

    def _fetched(self, target: str, headers: Mapping[str, str]) -> Reply | None:
        if "?" in target or any(name.lower() in _LEFT_TO_MOTO for name in headers):
            return None
        bucket_name, _, key_name = target.lstrip("/").partition("/")
        bucket = self._backend().buckets.get(bucket_name)
        if bucket is None or not key_name or bucket.is_versioned or bucket.cors:
            return None
        stored = bucket.keys.get(unquote(key_name))
        if stored is None or stored.storage_class not in (None, "STANDARD"):
            return None
        reply = dict(stored.response_dict)
        if headers_say(headers, "x-amz-checksum-mode") == "ENABLED" and stored.checksum_algorithm:
            parts = f"-{stored.checksum_parts}" if stored.checksum_type == "COMPOSITE" else ""
            reply[f"x-amz-checksum-{stored.checksum_algorithm.lower()}"] = f"{stored.checksum_value}{parts}"
            if stored.checksum_type:
                reply["x-amz-checksum-type"] = stored.checksum_type
        reply.update({**stored.metadata, "Accept-Ranges": "bytes"})
        return 200, {str(k): str(v) for k, v in reply.items()}, bytes(stored.value)

    def _listed(self, target: str, headers: Mapping[str, str]) -> Reply | None:
        path, _, query = target.partition("?")
        asked = dict(parse_qsl(query, keep_blank_values=True))
        bucket_name = path.strip("/")
        if asked.get("list-type") != "2" or asked.get("delimiter") or asked.get("fetch-owner") == "true":
            return None
        bucket = self._backend().buckets.get(bucket_name)
        if bucket is None or "/" in bucket_name or bucket.is_versioned:
            return None
        keys = self._sorted_keys(bucket_name, bucket)
        prefix = asked.get("prefix", "")
        after = asked.get("start-after", "")
        token = asked.get("continuation-token")
        if token:
            try:
                after = max(after, base64.urlsafe_b64decode(token.encode()).decode())
            except (ValueError, UnicodeDecodeError):
                return None  # moto says what is wrong with it
        limit = min(int(asked.get("max-keys") or 1000), 1000) if (asked.get("max-keys") or "1").isdigit() else 0
        if limit == 0:  # an odd question: moto's answer
            return None
        start = bisect.bisect_right(keys, after) if after else 0
        start = max(start, bisect.bisect_left(keys, prefix))
        page: list[str] = []
        for key in itertools.islice(keys, start, None):
            if not key.startswith(prefix) or len(page) == limit:
                break
            page.append(key)
        truncated = len(page) == limit and start + len(page) < len(keys) and keys[start + len(page)].startswith(prefix)
        encode = (lambda text: quote(text, safe="/")) if asked.get("encoding-type") == "url" else (lambda text: text)
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
            f"<Name>{escape(bucket_name)}</Name><Prefix>{escape(encode(prefix))}</Prefix>",
            f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{limit}</MaxKeys>",
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
        ]
        if asked.get("encoding-type") == "url":
            parts.append("<EncodingType>url</EncodingType>")
        if token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if truncated:
            following = base64.urlsafe_b64encode(page[-1].encode()).decode()
            parts.append(f"<NextContinuationToken>{following}</NextContinuationToken>")
        if asked.get("start-after"):
            parts.append(f"<StartAfter>{escape(encode(asked['start-after']))}</StartAfter>")
        for key in page:
            stored = bucket.keys[key]
            parts.append(
                f"<Contents><Key>{escape(encode(key))}</Key><LastModified>{stored.last_modified_ISO8601}</LastModified>"
                f"<ETag>{escape(stored.etag)}</ETag><Size>{stored.size}</Size>"
                f"<StorageClass>{stored.storage_class or 'STANDARD'}</StorageClass></Contents>"
            )
        parts.append("</ListBucketResult>")
        return 200, {"Content-Type": "application/xml"}, "".join(parts).encode()

    def _sorted_keys(self, bucket_name: str, bucket: Any) -> list[str]:
        """The bucket's keys in order, sorted again only after a write (``version`` counts every write)."""
        kept = self._sorted.get(bucket_name)
        if kept is None or kept[0] != self.version:
            kept = self._sorted[bucket_name] = (self.version, sorted(bucket.keys.keys()))
        return kept[1]

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


def headers_say(headers: Mapping[str, str], name: str) -> str | None:
    """A request header's value, whatever case the client wrote its name in."""
    return next((value for key, value in headers.items() if key.lower() == name), None)


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
