"""Where the files more than one host reads live: a local folder or object storage, through Airflow's
``ObjectStoragePath`` (fsspec underneath).

``[sm_prefs] storage`` (with ``[sm_prefs] storage_conn_id``) names one shared location, under which the
capacity ledger (``<storage>/ledger/``), the price table (``<storage>/prices.json``) and the certification
registry (``<storage>/certified.yaml``) live unless their own setting names another place. Unset, each file
stays under ``$AIRFLOW_HOME/sm_prefs/``, which is enough for one host (``make demo``, ``airflow standalone``,
``airflow dags test``).

A URL whose filesystem is not installed (``s3://`` without s3fs) is refused here, where the setting is read,
with one line naming the setting and what to install, rather than at the first read deep inside a caller.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from airflow_sm_prefs.errors.base import SageMakerPreferencesError
from airflow_sm_prefs.storage.paths import default_file

SECTION = "sm_prefs"

# What to install for each scheme this package documents; fsspec names the rest itself.
EXTRA_FOR_SCHEME = {"s3": "airflow-sm-prefs[s3]", "s3a": "airflow-sm-prefs[s3]"}


class StorageUnavailable(SageMakerPreferencesError, OSError):
    """A configured location cannot be used: its filesystem is not installed, or the URL is not one."""


class StorageSettingError(StorageUnavailable):
    """A setting names no usable place (no bucket, a relative path, a connection that does not exist): refused
    where it is read, never guessed at."""


_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):(?P<slashes>/*)(?P<rest>.*)", re.S)
# S3's rules for a bucket's name (general purpose buckets): 3 to 63 characters, lowercase letters, digits, dots
# and hyphens, beginning and ending with a letter or digit, no two dots in a row.
_BUCKET = re.compile(r"(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BUCKET_SCHEMES = ("s3", "s3a", "s3n", "gs", "gcs")

# The password in a URL's user-info (scheme://user:password@host), wherever a URL sits in a text.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:]*):[^\s/@]*@")


def shown_url(text: str) -> str:
    """``text`` (a URL, or a message quoting one) with the password of every URL's user-info replaced
    (``http://user:***@host``): every URL the package prints goes through here, as a connection's endpoint or a
    storage setting may carry one."""
    return _URL_PASSWORD.sub(r"\1:***@", text)


def checked_url(url: str, named: str) -> str:
    """``url`` if it names a place this package may use, else ``StorageSettingError`` naming ``named`` (the
    setting or argument it came from) and what is wrong with it."""
    said = f"{named} = {shown_url(url)!r:.120}"
    if not url.strip() or url != url.strip() or any(ord(c) < 32 for c in url):
        raise StorageSettingError(f"{said}: empty, or with spaces or control characters around or in it")
    found = _SCHEME.fullmatch(url)
    if found is None:  # a local path
        if not os.path.isabs(os.path.expanduser(url)):
            raise StorageSettingError(
                f"{said}: a relative path would land under whatever folder each process starts in; give an "
                "absolute path, or a URL such as s3://bucket/prefix"
            )
        return url
    scheme, slashes, rest = found["scheme"].lower(), found["slashes"], found["rest"]
    if any(c in rest for c in "?# ") or any(c.isspace() for c in rest):
        # fsspec would write "s3://team/x?versionId=1" to the key "team/x", outside the prefix the user meant.
        raise StorageSettingError(
            f"{said}: a query (?), a fragment (#) or a space has no meaning in a store's location; name the "
            "bucket and prefix alone (s3://bucket/prefix)"
        )
    if len(slashes) < 2:
        raise StorageSettingError(f"{said}: not a URL ({scheme}:// takes two slashes)")
    if scheme in ("file", "local"):
        if not (slashes[2:] + rest).startswith("/"):
            raise StorageSettingError(
                f"{said}: {scheme}:// takes an absolute path ({scheme}:///srv/sm-prefs); this one is relative"
            )
        return url
    if scheme in _BUCKET_SCHEMES:
        bucket = (slashes[2:] + rest).lstrip("/").split("/", 1)[0] if len(slashes) == 2 else ""
        if not bucket:
            raise StorageSettingError(f"{said}: names no bucket ({scheme}://bucket/prefix)")
        if "@" in bucket:  # never quoted back: it may hold a password
            raise StorageSettingError(
                f"{said}: a user or password has no place in a store's URL; its connection holds the credentials "
                "([sm_prefs] storage_conn_id)"
            )
        if not _BUCKET.fullmatch(bucket):
            raise StorageSettingError(
                f"{said}: {bucket!r:.70} is not a bucket's name (3 to 63 lowercase letters, digits, dots and hyphens)"
            )
    return url


# Connections found, per process: every reading of the ledger opens its root, and a lookup can be a call to a
# secrets backend or the API server. A miss is never kept, so a connection created later is found then.
_FOUND_CONNECTIONS: set[str] = set()


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import BaseHook

    if conn_id in _FOUND_CONNECTIONS:
        return True
    try:
        BaseHook.get_connection(conn_id)
    except Exception as error:  # the exception's class differs between Airflow lines; its name does not
        if type(error).__name__ == "AirflowNotFoundException":
            return False
        raise
    _FOUND_CONNECTIONS.add(conn_id)
    return True


def open_root(url: str, conn_id: str | None, setting: str) -> Any:
    """``url`` as an ``ObjectStoragePath`` with its filesystem made (no call to the store yet).
    ``setting``: the option the URL came from, for the message."""
    return _opened(checked_url(url, setting), conn_id, setting)


def _opened(url: str, conn_id: str | None, setting: str) -> Any:
    """``open_root`` for a URL already checked."""
    from airflow.sdk import ObjectStoragePath

    if conn_id and not _connection_exists(conn_id):
        # The amazon provider would go on with the default credentials chain and AWS's own endpoints: refused.
        raise StorageSettingError(
            f"{setting} = {url}: its connection {conn_id!r} does not exist; create it, or unset "
            f"[{SECTION}] storage_conn_id to use the default credentials on purpose"
        )

    def made() -> Any:
        return ObjectStoragePath(url, conn_id=conn_id) if conn_id else ObjectStoragePath(url)

    try:
        root = made()
        # The scheme's filesystem is made here, so a missing one is found here. A path keeps the filesystem it was
        # made with (Airflow 3.3's task SDK hands it over at construction), so one made before the bounded
        # filesystem took its place is made again.
        if _bound_requests(root, url, conn_id):
            root = made()
    except ImportError as error:
        scheme = url.split("://", 1)[0] if "://" in url else "file"
        extra = EXTRA_FOR_SCHEME.get(scheme)
        if extra:  # fsspec's and the amazon provider's own messages name other packages: say ours
            raise StorageUnavailable(
                f"{setting} = {url}: the {scheme}:// filesystem is not installed; pip install '{extra}'"
            ) from None
        raise StorageUnavailable(f"{setting} = {url}: {error}; install the fsspec filesystem for {scheme}://") from None
    except ValueError as error:  # a scheme fsspec does not know
        raise StorageUnavailable(f"{setting} = {url}: {error}") from None
    return root


def _bound_requests(root: Any, url: str, conn_id: str | None) -> bool:
    """Give ``root``'s connection a filesystem whose requests are bounded (``_client_options``); whether it had to
    be made (a path made before then holds the old one).

    Airflow keeps one filesystem per scheme and connection in the process and makes it without storage options
    (``ObjectStoragePath.fs`` attaches by scheme and connection alone), so the bounded one takes its place in
    that cache: this process's other uses of the same connection get the same timeouts, which only bound how
    long a silent store is waited on."""
    options = _client_options(url)
    filesystem = root.fs
    if not options or getattr(filesystem, "config_kwargs", {}).get("read_timeout") == options["read_timeout"]:
        return False
    from airflow.sdk.io import attach, get_fs

    bounded = get_fs(root.protocol, conn_id, storage_options=options)
    bounded.retries = 1  # s3fs's own retries on top of botocore's would multiply the attempts
    _send_bodies_at_once(bounded)
    attach(root.protocol, conn_id).fs = bounded
    return True


def _send_bodies_at_once(filesystem: Any) -> None:
    """Writes without ``Expect: 100-continue``, which botocore adds to every upload from a file-like body.

    aiohttp starts a request's read timeout only once the body is sent, and waits for "100 Continue" with no
    bound: a store or a dead pooled connection that takes the headers and stays silent held the write's thread
    for good, past every deadline. Sent at once, the body is followed by the bounded wait for the answer. The
    objects written here are small, so what 100-continue saves on a refused upload is a few kilobytes."""
    # The amazon provider's aiobotocore session: s3fs makes its client from it at the first call, and a client
    # takes the session's handlers when it is made.
    session = getattr(filesystem, "session", None)
    if session is None:
        return
    session.get_component("event_emitter").register_last(
        "before-call.s3", _without_expect_continue, unique_id="sm-prefs-no-expect-continue"
    )


def _without_expect_continue(params: dict[str, Any], **_: Any) -> None:
    params.get("headers", {}).pop("Expect", None)


DEFAULT_DEADLINE_SECONDS = 30.0  # tens of seconds in all: a store that answers at all answers well within it
CONNECT_TIMEOUT_SECONDS = 5.0
REQUEST_ATTEMPTS = 2
# Connections one process keeps to the store: botocore's default of 10 would queue a reader's concurrent GETs.
CONNECTION_POOL = 64


def deadline_seconds() -> float:
    """``[sm_prefs] storage_timeout``: seconds one operation on the shared store may take in all."""
    configured = setting("storage_timeout")
    if configured is None:
        return DEFAULT_DEADLINE_SECONDS
    try:
        seconds = float(configured)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise StorageSettingError(f"[{SECTION}] storage_timeout = {configured!r:.40}: a positive number of seconds")
    return seconds


def _client_options(url: str) -> dict[str, Any]:
    """Each request to an object store bounded so that its attempts fit the deadline (botocore's connect and
    read timeouts, two attempts), and s3fs's own retries off (``open_root``): a store that never answers costs
    one deadline per request, not minutes."""
    if url.split("://", 1)[0].lower() not in ("s3", "s3a", "s3n"):
        return {}
    per_attempt = deadline_seconds() / REQUEST_ATTEMPTS
    return {
        "connect_timeout": min(CONNECT_TIMEOUT_SECONDS, per_attempt),
        "read_timeout": per_attempt,
        "retries": {"total_max_attempts": REQUEST_ATTEMPTS, "mode": "standard"},
        "max_pool_connections": CONNECTION_POOL,
    }


def store_named() -> str:
    """The shared store as its settings name it, for a line about its failure."""
    for option in ("storage", "ledger_path", "price_table", "certification_registry"):
        value = setting(option)
        if value:
            return f"the shared store ([{SECTION}] {option} = {shown_url(value)})"
    return "the local store under $AIRFLOW_HOME/sm_prefs"


def setting(option: str) -> str | None:
    from airflow.configuration import conf

    return conf.get(SECTION, option, fallback=None) or None


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith(("file://", "local://"))


def shared_url(option: str, name: str, given: str | None = None) -> tuple[str, str | None]:
    """Where one shared file or folder lives, as text (nothing is opened): ``given`` (an operator's argument),
    else its own setting ``[sm_prefs] <option>``, else ``<[sm_prefs] storage>/<name>``, else
    ``$AIRFLOW_HOME/sm_prefs/<name>``; and the setting it came from (None for the default or ``given``)."""
    if given:  # checked where it is opened (``place``), with the argument's name
        return given, None
    own = setting(option)
    if own:
        return checked_url(own, f"[{SECTION}] {option}"), f"[{SECTION}] {option}"
    storage = setting("storage")
    if storage:
        return f"{checked_url(storage, f'[{SECTION}] storage').rstrip('/')}/{name}", f"[{SECTION}] storage"
    return default_file(name), None


def setting_behind(option: str, name: str) -> str:
    """The setting that decides where a shared file lives, as a message names it: the one the user set
    (``[sm_prefs] ledger_path`` or ``[sm_prefs] storage``), never one they did not."""
    _, named = shared_url(option, name)
    return named or f"the default place ({default_file(name)}: [{SECTION}] storage is not set)"


def shared_file(option: str, name: str, conn_option: str = "storage_conn_id") -> Any:
    """``shared_url``'s place opened: a local one as a ``pathlib.Path``, anything else an ``ObjectStoragePath``
    on ``[sm_prefs] <conn_option>`` when the file's own setting named it, else on ``storage_conn_id``."""
    url, named = shared_url(option, name)  # checked there, where the setting is read
    own = named == f"[{SECTION}] {option}"
    return _placed(url, (setting(conn_option) if own else None) or setting("storage_conn_id"), named or option)


def place(url: str, conn_id: str | None, named: str) -> Any:
    """A local path as a ``pathlib.Path``, any other URL as an ``ObjectStoragePath`` (see ``open_root``)."""
    return _placed(checked_url(url, named), conn_id, named)


def _placed(url: str, conn_id: str | None, named: str) -> Any:
    if is_local(url):
        return Path(os.path.expanduser(url.removeprefix("file://").removeprefix("local://")))
    return _opened(url, conn_id, named)


def shown(path: Any) -> str:
    """``path`` as its setting would name it: an ``ObjectStoragePath`` prints its connection id inside the URL
    (``s3://conn@bucket/key``), which no setting says."""
    if on_local_disk(path):
        return str(path)
    return f"{path.protocol}://{path.path}"


def is_host_path(path: Any) -> bool:
    """Whether ``path`` is a ``pathlib.Path`` of this host, not an ``ObjectStoragePath``: on Airflow 3.1
    (universal-pathlib 0.2) an ``ObjectStoragePath`` is a ``pathlib.Path`` too, told apart by its protocol."""
    return isinstance(path, Path) and not hasattr(path, "protocol")


def on_local_disk(path: Any) -> bool:
    return is_host_path(path) or getattr(path, "protocol", "file") in ("file", "local", "")


def make_folder(path: Any) -> None:
    """A folder for files to come: made on a local disk; on object storage nothing, since a prefix needs no
    folder and fsspec's ``mkdir`` there creates a missing bucket (this package never creates a bucket)."""
    if on_local_disk(path):
        path.mkdir(parents=True, exist_ok=True)


def bucket_missing(path: Any) -> str | None:
    """The bucket ``path`` lies in when the store says it does not exist; None when it does, or on a local disk."""
    if on_local_disk(path):
        return None
    bucket = str(path.path).split("/", 1)[0]
    ask = getattr(path.fs, "call_s3", None)
    if ask is None:  # another store: fsspec's own answer
        path.fs.invalidate_cache(bucket)
        return None if path.fs.exists(bucket) else bucket
    try:  # not fsspec's exists(), which says False for a store it cannot reach as for a missing bucket
        ask("head_bucket", Bucket=bucket)
    except FileNotFoundError:
        return bucket
    return None


MISSING_BUCKET_FIX = "create it (this package never creates one) or correct the setting"


def missing_bucket_said(path: Any, setting: str) -> str | None:
    """The line saying that ``path``'s bucket does not exist, naming the setting behind it; None when it exists. The
    CLI and doctor say it alike: an empty answer from a missing bucket would read as an empty store."""
    bucket = bucket_missing(path)
    return None if bucket is None else f"{setting} ({shown(path)}): the bucket {bucket!r} does not exist"


def version_of(path: Any) -> tuple[Any, ...]:
    """What changes when the file is replaced: locally its modification time, size and inode; on object storage its
    ETag (asked for again each time: a listing fsspec kept would hide another host's write)."""
    if is_host_path(path):
        found = path.stat()
        return (found.st_mtime_ns, found.st_size, found.st_ino)
    version = current_version(path)
    if version is None:
        raise FileNotFoundError(str(path))
    return (version,)


def replace_whole(path: Any, text: str, prefix: str) -> None:
    """Write ``text`` so that a reader sees the old file or the new one, never a part: locally a temporary file
    in the same folder renamed over it; on object storage one PUT (an object is replaced whole)."""
    if not is_host_path(path):
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=prefix, delete=False) as stream:
        stream.write(text)
    os.replace(stream.name, path)


class ChangedMeanwhile(SageMakerPreferencesError):
    """A conditional write found the object changed since it was read (or created since it was found missing)."""


def current_version(path: Any) -> str | None:
    """The object's ETag, asked of the store now; None when there is no object."""
    path.fs.invalidate_cache(path.path)
    try:
        info = path.fs.info(path.path)
    except FileNotFoundError:
        return None
    return version_in(info)


def version_in(info: dict[str, Any]) -> str:
    """What says an object changed, from its listing or its HEAD: S3's ETag, else another store's equivalent."""
    changed = info.get("ETag") or info.get("etag")
    return str(changed or (info.get("LastModified") or info.get("mtime"), info.get("size")))


def write_if_unchanged(path: Any, data: bytes, version: str | None) -> None:
    """One PUT that succeeds only if the object is still at ``version`` (``If-Match``), or, with None, still
    absent (``If-None-Match: *``); ``ChangedMeanwhile`` otherwise. S3 (and stores that speak its API) only."""
    condition: dict[str, Any] = {"mode": "create"} if version is None else {"IfMatch": version}
    try:
        path.fs.pipe_file(path.path, data, **condition)
    except OSError as error:
        if isinstance(error, FileExistsError) or precondition_failed(error):
            raise ChangedMeanwhile(str(path)) from None
        raise


def precondition_failed(error: BaseException) -> bool:
    """Whether the store refused a conditional request because the object is no longer at that version."""
    response = getattr(error.__cause__, "response", None) or getattr(error, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") in ("PreconditionFailed", "412")
