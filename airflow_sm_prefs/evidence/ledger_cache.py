"""The CLI's memory of a ledger on object storage between runs: each object's decoded entries under its key and
ETag, in a cache folder on this host, so a second ``report`` fetches only what changed since the first (the
report's rows for the same question over the same listing are kept the same way: ``analysis.kept_reports``).

Never trusted over the store: an object is taken from the cache only when the store's listing gives the same
ETag (a whole-object PUT changes it with the content), so the cache can only save fetches, never change a
figure. Anything in the folder that is not exactly what this version wrote, for this ledger and this code, is
ignored and written again: each file opens with a digest of its body and of the code that wrote it, is read
only if it is a regular file of bounded size, and every entry it holds is judged as a fetched one. A digest
catches damage and hand edits, not a forger who can also run this code: whoever may write this host's
``$AIRFLOW_HOME`` can change what it prints, cache or not. Safe to delete. JSON, not pickle: a file on disk is
never code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

from airflow_sm_prefs.evidence import ledger, ledger_entry, ledger_files, reading_memo
from airflow_sm_prefs.storage import object_storage, paths

log = logging.getLogger(__name__)

FORMAT = 2  # 2: a digest line before the body
MAX_CACHE_BYTES = 1 << 30  # 100,000 jobs' entries are about 100 MB; a larger file is not one this code wrote


def cache_file(root: Any, keep: tuple[str, ...]) -> Path:
    """One file per ledger and set of kept fields, under ``$AIRFLOW_HOME/sm_prefs/cache/``."""
    name = hashlib.sha256(f"{root}\0{','.join(keep)}".encode()).hexdigest()[:24]
    return Path(paths.default_file("cache")) / f"ledger-{name}.json"


def load(root: Any, keep: tuple[str, ...]) -> reading_memo.ReadingMemo:
    """A memo holding what the last run read of ``root``; an empty one when there is no usable cache."""
    memo = reading_memo.ReadingMemo()
    where = cache_file(root, keep)
    if not where.exists() and not where.is_symlink():
        return memo
    try:
        saved = verified(where)
        if saved.get("format") != FORMAT or saved.get("root") != str(root) or saved.get("keep") != list(keep):
            raise ValueError("written for another ledger, set of fields or version")
        lists = saved["lists"]
        judged = ledger_files.judged_fields(keep)
        objects = {
            key: (
                _text(version),
                _file_reading(key, rows, bad=bad, keep=keep, lists=lists, shared=memo.shared, judged=judged),
            )
            for key, (version, rows, bad) in saved["objects"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as error:  # only ever a saving
        log.info("Ignoring the ledger cache %s (%s); it will be written again", where, error)
        return memo
    memo.hold(str(root), keep, fresh=objects, listed=set(objects), folders=None)
    memo.changed = False  # what the file holds: nothing to write back unless a reading changes it
    return memo


def save(memo: reading_memo.ReadingMemo, root: Any, keep: tuple[str, ...]) -> None:
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
    body = json.dumps({"format": FORMAT, "root": str(root), "keep": list(keep), "lists": listed, "objects": objects})
    try:
        object_storage.replace_whole(where, signed(body), prefix=".ledger-cache-")
    except OSError as error:
        log.warning("Could not keep the ledger's reading in %s for the next run: %s", where, error)


@functools.cache
def reader_digest() -> str:
    """The code that makes what the cache keeps (each file's entries, judged and kept to the report's fields), as
    installed: a reading kept by another version is never used."""
    from airflow_sm_prefs.facts import failure_cause

    return code_digest(ledger, ledger_entry, ledger_files, failure_cause, sys.modules[__name__])


def code_digest(*modules: Any) -> str:
    """A digest of the installed source of ``modules``: what a cache written by that code is signed with."""
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def signed(body: str, code: str | None = None) -> str:
    """``body`` after a line holding the digest of it and of the code (``code``: this reader's) that wrote it:
    ``verified`` reads nothing else."""
    return f"{_digest(body.encode(), code)}\n{body}"


def verified(where: Path, code: str | None = None) -> dict[str, Any]:
    """The JSON object ``signed`` wrote at ``where`` with the same ``code``; ``ValueError`` for anything else (a
    FIFO, a device, a file too large, another version's or a hand-edited one)."""
    from airflow_sm_prefs.storage import untrusted_files

    # Judged on the bytes as read: a cache of 100,000 entries is some 100 MB, decoded once, by the JSON parser.
    digest, _, body = untrusted_files.read_bytes(where, MAX_CACHE_BYTES).partition(b"\n")
    if digest != _digest(body, code).encode():
        raise ValueError("its digest does not match its body and this code")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return document


def _digest(body: bytes, code: str | None) -> str:
    hashed = hashlib.sha256(f"{reader_digest() if code is None else code}\n".encode())
    hashed.update(body)
    return hashed.hexdigest()


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"an ETag of {type(value).__name__}")
    return value


def _file_reading(
    key: str,
    rows: list[Any],
    *,
    bad: list[str],
    keep: tuple[str, ...],
    lists: list[Any],
    shared: dict[Any, Any],
    judged: frozenset[str] | None,
) -> Any:
    """One object's entries as the cache holds them, each judged as a fetched entry is (``why_unusable``)."""
    folder = key.partition("/")[0]
    at = keep.index("preferences") if "preferences" in keep else None
    entries: list[Any] = []
    for region, job_name, values in rows:
        entry = dict(zip(keep, values, strict=True))
        if at is not None:
            listed = lists[values[at]]
            entry["preferences"] = shared.setdefault(("preferences", repr(listed)), listed)
        problem = ledger_entry.why_unusable({**entry, "format": ledger_entry.FORMAT}, judged)
        if problem is not None or (region, job_name) != (entry.get("region"), entry.get("job_name")):
            raise ValueError(f"{key}: an entry this version would not take ({problem or 'keyed by another job'})")
        entries.append(((folder, region, job_name), entry))
    return ledger_files.FileReading(entries, [str(problem) for problem in bad])
