"""The CLI's memory of a ledger on object storage between runs: each object's decoded entries under its key and
ETag, in a cache folder on this host, so a second ``report`` fetches only what changed since the first; and the
report's rows for the same question over the same listing, so it is not computed again either.

Never trusted over the store: an object is taken from the cache only when the store's listing gives the same
ETag (a whole-object PUT changes it with the content), so the cache can only save fetches, never change a
figure. Safe to delete; a file this version cannot read is ignored and written again. JSON, not pickle: a
file on disk is never code.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_sm_prefs.evidence import ledger
from airflow_sm_prefs.storage import object_storage, paths

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
        object_storage.replace_whole(
            where,
            json.dumps({"format": FORMAT, "root": str(root), "keep": list(keep), "lists": listed, "objects": objects}),
            prefix=".ledger-cache-",
        )
    except OSError as error:
        log.warning("Could not keep the ledger's reading in %s for the next run: %s", where, error)


KEPT_REPORTS = 16  # distinct questions (filters, windows) kept; the oldest go first


def remembered_rows(
    reading: ledger.Reading, question: tuple[Any, ...], compute: Callable[[], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """``compute()``, or what it gave for the same ``question`` over a reading whose folders listed the same keys
    and ETags, computed by the same code. A reading without a signature (a local folder) is always computed."""
    if reading.signature is None:
        return compute()
    question_text = json.dumps([repr(reading.signature), repr(question), _code_digest()])
    where = Path(paths.default_file("cache")) / f"report-{hashlib.sha256(question_text.encode()).hexdigest()[:24]}.json"
    try:
        kept = json.loads(where.read_bytes())
        if isinstance(kept, list):
            return kept
    except (OSError, ValueError):
        pass
    rows = compute()
    try:
        object_storage.replace_whole(where, json.dumps(rows), prefix=".report-rows-")
        older = sorted(where.parent.glob("report-*.json"), key=lambda path: path.stat().st_mtime_ns)
        for stale in older[:-KEPT_REPORTS]:
            stale.unlink(missing_ok=True)
    except OSError as error:
        log.warning("Could not keep the report's rows in %s for the next run: %s", where, error)
    return rows


def _code_digest() -> str:
    """The report's code as installed: rows computed by another version are never served."""
    from airflow_sm_prefs.evidence import counterfactual, report, survival
    from airflow_sm_prefs.platform import formatting

    digest = hashlib.sha256()
    for module in (report, counterfactual, survival, ledger, formatting):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


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
