"""The CLI's memory of a ledger on object storage between runs: each object's decoded entries under its key and
ETag, in a cache folder on this host, so a second ``report`` fetches only what changed since the first.

Never trusted over the store: an object is taken from the cache only when the store's listing gives the same
ETag (a whole-object PUT changes it with the content), so the cache can only save fetches, never change a
figure. Safe to delete; a file this version cannot read is ignored and written again. JSON, not pickle: a
file on disk is never code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from airflow_sm_prefs.evidence import ledger
from airflow_sm_prefs.storage import paths

log = logging.getLogger(__name__)

FORMAT = 1


def cache_file(root: Any, keep: tuple[str, ...]) -> Path:
    """One file per ledger and set of kept fields, under ``$AIRFLOW_HOME/sm_prefs/cache/``."""
    name = hashlib.sha256(f"{root}\0{','.join(keep)}".encode()).hexdigest()[:24]
    return Path(paths.default_file("cache")) / f"ledger-{name}.json"


def load(root: Any, keep: tuple[str, ...]) -> ledger.ReadingMemo:
    """A memo holding what the last run read of ``root``; an empty one when there is no usable cache."""
    memo = ledger.ReadingMemo()
    where = cache_file(root, keep)
    try:
        saved = json.loads(where.read_bytes())
        if saved.get("format") != FORMAT or saved.get("root") != str(root) or saved.get("keep") != list(keep):
            return memo
        lists = saved["lists"]
        objects = {
            key: (version, _file_reading(key, rows, bad, keep, lists, memo.shared))
            for key, (version, rows, bad) in saved["objects"].items()
        }
    except FileNotFoundError:
        return memo
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:  # a cache is only ever a saving
        log.info("Ignoring the ledger cache %s (%s); it will be written again", where, error)
        return memo
    memo.hold(str(root), keep, objects, set(objects), None)
    memo.changed = False  # what the file holds: nothing to write back unless a reading changes it
    return memo


def save(memo: ledger.ReadingMemo, root: Any, keep: tuple[str, ...]) -> None:
    """Write what ``memo`` holds of ``root`` for the next run, if a reading changed it; a cache that cannot be
    written costs only that."""
    if not memo.changed:
        return
    lists: dict[int, int] = {}  # by identity: the reader keeps one copy of each list (``ReadingMemo.shared``)
    listed: list[Any] = []
    objects = {}
    for key, (version, part) in memo.objects(str(root), keep).items():
        rows = []
        for (_, region, job_name), entry in part.entries:
            values = [entry.get(field) for field in keep]
            if "preferences" in keep:  # one copy of each list: 100,000 jobs share a handful
                at = keep.index("preferences")
                if id(values[at]) not in lists:
                    lists[id(values[at])] = len(listed)
                    listed.append(values[at])  # held here, so no other list takes its identity meanwhile
                values[at] = lists[id(values[at])]
            rows.append([region, job_name, values])
        objects[key] = [version, rows, part.bad]
    where = cache_file(root, keep)
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        temporary = where.with_name(f".{where.name}.{os.getpid()}.tmp")
        temporary.write_text(
            json.dumps({"format": FORMAT, "root": str(root), "keep": list(keep), "lists": listed, "objects": objects})
        )
        os.replace(temporary, where)
    except OSError as error:
        log.warning("Could not keep the ledger's reading in %s for the next run: %s", where, error)


def _file_reading(
    key: str, rows: list[Any], bad: list[str], keep: tuple[str, ...], lists: list[Any], shared: dict[Any, Any]
) -> Any:
    folder = key.partition("/")[0]
    at = keep.index("preferences") if "preferences" in keep else None
    entries: list[Any] = []
    for region, job_name, values in rows:
        entry = dict(zip(keep, values, strict=True))
        if at is not None:
            listed = lists[values[at]]
            entry["preferences"] = shared.setdefault(("preferences", repr(listed)), listed)
        entries.append(((folder, region, job_name), entry))
    return ledger.FileReading(entries, [str(problem) for problem in bad])
