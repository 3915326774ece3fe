"""A report's reading of the ledger, the same for the command line and the Capacity page: the fields a report keeps,
through the reader's memo, and the fold of old job objects when the reading finds it due.

Each reader keeps its memo its own way (the CLI in a file between runs, ``ledger_cache``; the API server in
memory) and folds when it can afford to (the CLI in its run, the page in a thread of its own); what a reading
holds and when it folds are decided here once. A store that refuses the fold (a role that may not delete) costs
the fold, never the reading: the caller is told, in a ``Fold``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from airflow_sm_prefs.evidence import ledger_cache, ledger_compaction
from airflow_sm_prefs.evidence.ledger_entry import REPORT_FIELDS
from airflow_sm_prefs.evidence.ledger_reading import Reading, read
from airflow_sm_prefs.evidence.reading_memo import ReadingMemo
from airflow_sm_prefs.storage import object_storage


def reading(root: Any, memo: ReadingMemo | None, dags: Collection[str] | None = None) -> Reading:
    """The entries a report reads (of the DAGs in ``dags``, if given), through ``memo`` when there is one."""
    return read(root, dags=dags, fields=REPORT_FIELDS, memo=memo)


def on_this_host(root: Any) -> tuple[Reading, Fold | None]:
    """The reading of a process that keeps its memo in this host's cache between runs (the CLI), and the fold
    when it was due: a local folder is read faster than a cache of it, so it is read whole."""
    if object_storage.on_local_disk(root):
        return reading(root, None), None
    memo = ledger_cache.load(root, REPORT_FIELDS)
    read_now = reading(root, memo)
    ledger_cache.save(memo, root, REPORT_FIELDS)
    return read_now, fold_if_due(root, read_now)


def due(reading: Reading) -> bool:
    """Whether ``reading`` found old job objects at all: a local folder (None) or none never asks for a fold."""
    return bool(reading.old_job_objects)


@dataclass(frozen=True)
class Fold:
    """What a fold did: entries folded into month objects, or the store's refusal (``refused``)."""

    folded: int = 0
    files: int = 0
    refused: OSError | None = None


def fold_if_due(root: Any, reading: Reading) -> Fold | None:
    """Fold the ledger when ``reading`` found more old job objects than ``[sm_prefs] ledger_compact_after``; None
    when it is not due. A bad setting raises (``StorageSettingError``); the store's refusal is returned."""
    if not due(reading):
        return None
    try:
        result = ledger_compaction.compact_if_due(root, reading)
    except object_storage.StorageSettingError:
        raise
    except OSError as error:
        return Fold(refused=error)
    return None if result is None else Fold(result.folded, result.files)
