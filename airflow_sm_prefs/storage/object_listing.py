"""Many small objects under one prefix of an object store, read as a store allows it to be read fast: one
flat listing (a thousand keys with their ETags per request), then only the objects a reader does not already
hold, fetched many at a time.

Reading them one after another, as a folder is walked, costs a round trip per object: on S3, tens of
milliseconds each, an hour for a hundred thousand. Here the GETs run concurrently on fsspec's event loop: on S3
through s3fs's own client asked directly (half the CPU of s3fs's ``cat``), on another asynchronous store through
its ``cat``; each request bounded by the client's timeouts (``object_storage._client_options``), and the size
a reader of untrusted objects allows judged from the listing before any byte is fetched.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_sm_prefs.storage.object_storage import precondition_failed, version_in

_Answer = TypeVar("_Answer")

# GETs in flight at once: S3 serves thousands a second per prefix; this many keep a worker's connection pool
# (``object_storage.CONNECTION_POOL``) busy without queueing thousands of coroutines.
CONCURRENT_FETCHES = 64


@dataclass(frozen=True)
class ListedObject:
    """One object as the listing gave it: its key below the listed prefix, its version and its size."""

    key: str  # '/'-separated, relative to the prefix
    version: str  # the ETag where the store gives one: a whole-object PUT changes it with the content
    size: int
    modified: float | None = None  # when the store last wrote it (seconds since the epoch), if it says


def listing(root: Any) -> list[ListedObject]:
    """Every object below ``root`` (an ``ObjectStoragePath`` on a remote store), asked of the store now.

    One flat listing (no delimiter): S3 returns a thousand keys per request whatever the folders. fsspec keeps
    what it lists to answer later ``ls`` and ``exists`` calls; another host's writes would be hidden behind that,
    so what this listing left in the cache is dropped."""
    filesystem = root.fs
    prefix = str(root.path).rstrip("/")
    try:
        found = filesystem.find(prefix, detail=True)
    finally:
        for cached in [name for name in getattr(filesystem, "dircache", {}) if str(name).startswith(prefix)]:
            filesystem.dircache.pop(cached, None)
    objects = []
    for name, info in found.items():
        if info.get("type") == "directory" or not str(name).startswith(prefix + "/"):
            continue
        key = str(name)[len(prefix) + 1 :]
        objects.append(
            ListedObject(key, version_in(info), int(info.get("size") or 0), _seconds(info.get("LastModified")))
        )
    return objects


def _seconds(when: Any) -> float | None:
    return when.timestamp() if hasattr(when, "timestamp") else None


def fetch_many(root: Any, keys: list[str]) -> dict[str, bytes | None]:
    """The bodies of the objects at ``keys`` (below ``root``), fetched concurrently; None for an object gone
    since it was listed. Any other failure (denied, unreachable, timed out) is raised: a reading with holes
    would be a report with wrong figures."""
    if not keys:
        return {}
    prefix = str(root.path).rstrip("/")
    paths = {f"{prefix}/{key}": key for key in keys}
    filesystem = root.fs
    if hasattr(filesystem, "set_session") and hasattr(filesystem, "loop"):  # s3fs
        return _fetched_from_s3(filesystem, prefix, keys)
    if not hasattr(filesystem, "_cat"):  # a store without fsspec's asynchronous API: one after another
        fetched: dict[str, Any] = {}
        for path in paths:
            try:
                fetched[path] = filesystem.cat_file(path)
            except FileNotFoundError as gone:
                fetched[path] = gone
    else:
        fetched = filesystem.cat(list(paths), on_error="return", batch_size=CONCURRENT_FETCHES)
    bodies: dict[str, bytes | None] = {}
    for path, key in paths.items():
        body = fetched.get(path)
        if isinstance(body, FileNotFoundError) or body is None:
            bodies[key] = None
        elif isinstance(body, BaseException):
            raise body
        else:
            bodies[key] = bytes(body)
    return bodies


async def _each_ended(calls: list[Coroutine[Any, Any, _Answer]]) -> list[_Answer]:
    """Each call's answer, or the first failure once every call has ended. A call left running when a command
    prints its line and exits is torn down with the interpreter, and aiobotocore then prints a traceback of its
    own ("Token ... created in a different Context") under a line that was right."""
    import asyncio

    done = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in done:
        if isinstance(outcome, BaseException):
            raise outcome
    return done  # type: ignore[return-value]


def _fetched_from_s3(filesystem: Any, prefix: str, keys: list[str]) -> dict[str, bytes | None]:
    """GETs through the filesystem's own S3 client (its credentials, endpoint, timeouts and connection pool),
    asked directly: s3fs's ``cat`` filters each call's arguments against botocore's model and wraps it in its
    retries, which doubled the CPU a GET costs (2.7 -> 1.5 ms here), the bound of a reader of many objects."""
    import asyncio

    from fsspec.asyn import sync

    bucket, _, base = prefix.partition("/")

    async def fetch_all() -> list[bytes | None]:
        await filesystem.set_session()
        client = filesystem.s3
        gate = asyncio.Semaphore(CONCURRENT_FETCHES)

        async def fetch(key: str) -> bytes | None:
            async with gate:
                try:
                    answer = await client.get_object(Bucket=bucket, Key=f"{base}/{key}" if base else key)
                except client.exceptions.NoSuchKey:
                    return None
                async with answer["Body"] as body:
                    return bytes(await body.read())

        return await _each_ended([fetch(key) for key in keys])

    return dict(zip(keys, sync(filesystem.loop, fetch_all), strict=True))


def delete_unchanged(root: Any, versions: dict[str, str]) -> set[str]:
    """Delete the objects at ``versions``' keys (below ``root``) that are still at the version given, many at
    a time; the keys deleted. An object written again since (another version) or already gone is left alone:
    on S3 the condition is the store's own (``DeleteObject`` with ``If-Match``), so no write in between is lost."""
    if not versions:
        return set()
    import asyncio

    prefix = str(root.path).rstrip("/")
    filesystem = root.fs
    bucket, _, base = prefix.partition("/")
    call = getattr(filesystem, "_call_s3", None)
    if call is None:  # another store: asked, then deleted (a write in the moment between them is not seen)
        deleted = set()
        for key, version in versions.items():
            path = f"{prefix}/{key}"
            try:
                if version_in(filesystem.info(path)) == version:
                    filesystem.rm_file(path)
                    deleted.add(key)
            except FileNotFoundError:
                continue
        return deleted
    from fsspec.asyn import sync

    async def delete_all() -> set[str]:
        gate = asyncio.Semaphore(CONCURRENT_FETCHES)

        async def delete(key: str, version: str) -> str | None:
            async with gate:
                try:
                    await call("delete_object", Bucket=bucket, Key=f"{base}/{key}" if base else key, IfMatch=version)
                except FileNotFoundError:
                    return None
                except OSError as error:
                    if precondition_failed(error):
                        return None
                    raise
            return key

        done = await _each_ended([delete(key, version) for key, version in versions.items()])
        return {key for key in done if key is not None}

    try:
        return sync(filesystem.loop, delete_all)  # type: ignore[no-any-return]
    finally:
        filesystem.invalidate_cache(prefix)
