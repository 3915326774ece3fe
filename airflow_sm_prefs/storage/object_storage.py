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
import tempfile
from pathlib import Path
from typing import Any

from airflow_sm_prefs.storage.paths import default_file

SECTION = "sm_prefs"

# What to install for each scheme this package documents; fsspec names the rest itself.
EXTRA_FOR_SCHEME = {"s3": "airflow-sm-prefs[s3]", "s3a": "airflow-sm-prefs[s3]"}


class StorageUnavailable(OSError):
    """A configured location cannot be used: its filesystem is not installed, or the URL is not one."""


def open_root(url: str, conn_id: str | None, setting: str) -> Any:
    """``url`` as an ``ObjectStoragePath`` with its filesystem made (no call to the store yet).
    ``setting``: the option the URL came from, for the message."""
    from airflow.sdk import ObjectStoragePath

    try:
        root = ObjectStoragePath(url, conn_id=conn_id) if conn_id else ObjectStoragePath(url)
        root.fs  # noqa: B018 - the scheme's filesystem is made here, so a missing one is found here
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


def setting(option: str) -> str | None:
    from airflow.configuration import conf

    return conf.get(SECTION, option, fallback=None) or None


def is_local(url: str) -> bool:
    return "://" not in url or url.startswith(("file://", "local://"))


def shared_url(option: str, name: str, given: str | None = None) -> tuple[str, str | None]:
    """Where one shared file or folder lives, as text (nothing is opened): ``given`` (an operator's argument),
    else its own setting ``[sm_prefs] <option>``, else ``<[sm_prefs] storage>/<name>``, else
    ``$AIRFLOW_HOME/sm_prefs/<name>``; and the setting it came from (None for the default or ``given``)."""
    if given:
        return given, None
    own = setting(option)
    if own:
        return own, f"[{SECTION}] {option}"
    storage = setting("storage")
    if storage:
        return f"{storage.rstrip('/')}/{name}", f"[{SECTION}] storage"
    return default_file(name), None


def shared_file(option: str, name: str, conn_option: str = "storage_conn_id") -> Any:
    """``shared_url``'s place opened: a local one as a ``pathlib.Path``, anything else an ``ObjectStoragePath``
    on ``[sm_prefs] <conn_option>`` when the file's own setting named it, else on ``storage_conn_id``."""
    url, named = shared_url(option, name)
    own = named == f"[{SECTION}] {option}"
    return place(url, (setting(conn_option) if own else None) or setting("storage_conn_id"), named or option)


def place(url: str, conn_id: str | None, named: str) -> Any:
    """A local path as a ``pathlib.Path``, any other URL as an ``ObjectStoragePath`` (see ``open_root``)."""
    if is_local(url):
        return Path(os.path.expanduser(url.removeprefix("file://").removeprefix("local://")))
    return open_root(url, conn_id, named)


def version_of(path: Any) -> tuple[Any, ...]:
    """What changes when the file is replaced: locally its modification time, size and inode; on object storage its
    ETag (asked for again each time: a listing fsspec kept would hide another host's write)."""
    if isinstance(path, Path):
        found = path.stat()
        return (found.st_mtime_ns, found.st_size, found.st_ino)
    version = current_version(path)
    if version is None:
        raise FileNotFoundError(str(path))
    return (version,)


def replace_whole(path: Any, text: str, prefix: str) -> None:
    """Write ``text`` so that a reader sees the old file or the new one, never a part: locally a temporary file
    in the same folder renamed over it; on object storage one PUT (an object is replaced whole)."""
    if not isinstance(path, Path):
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=prefix, delete=False) as stream:
        stream.write(text)
    os.replace(stream.name, path)


class ChangedMeanwhile(Exception):
    """A conditional write found the object changed since it was read (or created since it was found missing)."""


def current_version(path: Any) -> str | None:
    """The object's ETag, asked of the store now; None when there is no object."""
    path.fs.invalidate_cache(path.path)
    try:
        info = path.fs.info(path.path)
    except FileNotFoundError:
        return None
    # S3 and the stores that speak its API give an ETag; for another store, what else says it changed.
    return str(info.get("ETag") or (info.get("LastModified"), info.get("size")))


def write_if_unchanged(path: Any, data: bytes, version: str | None) -> None:
    """One PUT that succeeds only if the object is still at ``version`` (``If-Match``), or, with None, still
    absent (``If-None-Match: *``); ``ChangedMeanwhile`` otherwise. S3 (and stores that speak its API) only."""
    condition: dict[str, Any] = {"mode": "create"} if version is None else {"IfMatch": version}
    try:
        path.fs.pipe_file(path.path, data, **condition)
    except OSError as error:
        if isinstance(error, FileExistsError) or _precondition_failed(error):
            raise ChangedMeanwhile(str(path)) from None
        raise


def _precondition_failed(error: BaseException) -> bool:
    cause = error.__cause__
    response = getattr(cause, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") == "PreconditionFailed"
