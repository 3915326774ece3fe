"""Deletes on object storage, many at a time: none is left running when one is refused."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from fsspec.asyn import get_loop

from airflow_sm_prefs.storage import object_listing


def test_a_refused_delete_ends_only_once_every_other_delete_has_ended():
    """A store that refuses DeleteObject: the error reaches the caller after the other deletes finished, so none
    is still running when a command prints its line and exits (it would be torn down with the interpreter)."""
    finished: list[str] = []

    async def call_s3(method: str, **request: str) -> None:
        if request["Key"].endswith("a.json"):
            raise PermissionError("AccessDenied: DeleteObject")
        await asyncio.sleep(0.2)  # answered after the refusal
        finished.append(request["Key"])

    filesystem = SimpleNamespace(_call_s3=call_s3, loop=get_loop(), invalidate_cache=lambda prefix: None)
    root = SimpleNamespace(path="team-bucket/sm-prefs/ledger", fs=filesystem)
    versions = {"nightly/a.json": '"1"', "nightly/b.json": '"2"', "nightly/c.json": '"3"'}
    with pytest.raises(PermissionError, match="AccessDenied"):
        object_listing.delete_unchanged(root, versions)
    assert sorted(finished) == ["sm-prefs/ledger/nightly/b.json", "sm-prefs/ledger/nightly/c.json"]
