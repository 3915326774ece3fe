"""Where a shared file of this package lives: a local folder or object storage, through Airflow's
``ObjectStoragePath`` (fsspec underneath).

A URL whose filesystem is not installed (``s3://`` without s3fs) is refused here, where the setting is read,
with one line naming the setting and what to install, rather than at the first read deep inside a caller.
"""

from __future__ import annotations

from typing import Any

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
        remedy = f"pip install '{extra}'" if extra else f"install the fsspec filesystem for {scheme}://"
        raise StorageUnavailable(f"{setting} = {url}: {error}; {remedy}") from None
    except ValueError as error:  # a scheme fsspec does not know
        raise StorageUnavailable(f"{setting} = {url}: {error}") from None
    return root
