"""The report's rows kept on this host between runs of the CLI, for the same question over a ledger whose
listing is the same (the same keys and ETags), computed by the same code: a second ``report`` over an unchanged
bucket computes nothing. Signed and judged like the ledger's own cache (``evidence.ledger_cache``): a kept file
this version did not write, for this question and this code, is computed again, never shown. Safe to delete.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_sm_prefs.evidence import ledger_cache, ledger_reading
from airflow_sm_prefs.storage import object_storage, paths

log = logging.getLogger(__name__)

KEPT_REPORTS = 16  # distinct questions (filters, windows) kept; the oldest go first


def remembered_rows(
    reading: ledger_reading.Reading, question: tuple[Any, ...], compute: Callable[[], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """``compute()``, or what it gave for the same ``question`` over a reading whose folders listed the same keys
    and ETags, computed by the same code. A reading without a signature (a local folder) is always computed."""
    if reading.signature is None:
        return compute()
    question_text = json.dumps([repr(reading.signature), repr(question), _code_digest()])
    where = Path(paths.default_file("cache")) / f"report-{hashlib.sha256(question_text.encode()).hexdigest()[:24]}.json"
    if where.exists() or where.is_symlink():
        try:
            kept = ledger_cache.verified(where, _code_digest())
            held = kept.get("rows")
            readable = isinstance(held, list) and all(isinstance(row, dict) for row in held)
            if kept.get("question") == question_text and readable:
                return list(held)  # type: ignore[arg-type]
        except (OSError, ValueError, AttributeError) as error:
            log.info("Ignoring the kept report %s (%s); it will be written again", where, error)
    rows = compute()
    try:
        body = json.dumps({"question": question_text, "rows": rows})
        object_storage.replace_whole(where, ledger_cache.signed(body, _code_digest()), prefix=".report-rows-")
        older = sorted(where.parent.glob("report-*.json"), key=lambda path: path.stat().st_mtime_ns)
        for stale in older[:-KEPT_REPORTS]:
            stale.unlink(missing_ok=True)
    except OSError as error:
        log.warning("Could not keep the report's rows in %s for the next run: %s", where, error)
    return rows


@functools.cache
def _code_digest() -> str:
    """The report's code as installed, and the ledger reader's: rows computed by another version are never served."""
    from airflow_sm_prefs.analysis import counterfactual, report, survival
    from airflow_sm_prefs.platform import formatting

    return ledger_cache.code_digest(report, counterfactual, survival, formatting) + ledger_cache.reader_digest()
