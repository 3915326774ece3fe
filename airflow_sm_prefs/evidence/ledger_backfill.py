"""Rebuilding the capacity ledger from SageMaker itself: every job this provider launched carries the
``airflow:*`` tags of its task instance, so its entry can be made again from its tags and description.

Lists the account's training and processing jobs created since a time (``List*Jobs``), skips those already
in the ledger or still running, reads the tags of the rest (``ListTags``), keeps those tagged by this
provider, and adds their entries (``source: backfill``). Running it twice adds nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pendulum

from airflow_sm_prefs.evidence import ledger, ledger_entry, ledger_writing
from airflow_sm_prefs.facts.job_facts import JobFacts
from airflow_sm_prefs.request.jobs import KINDS
from airflow_sm_prefs.sagemaker import job_status, tagging
from airflow_sm_prefs.sagemaker.job_view import JobView

PAGE_SIZE = 100


@dataclass
class Backfilled:
    listed: int = 0
    added: int = 0
    already: int = 0
    running: int = 0
    not_ours: int = 0
    kept_sent: int = 0  # entries this host kept while the store failed, sent first


def backfill(hook: Any, since: pendulum.DateTime, root: Any = None, region: str | None = None) -> Backfilled:
    """Add the missing entries of jobs created since ``since`` (``hook``: a ``SageMakerPreferenceHook``)."""
    root = root if root is not None else ledger.location()
    counts = Backfilled(kept_sent=ledger_writing.send_kept(root))  # the tasks' own entries, before any rebuilt one
    known = ledger.known_jobs(root)
    client = hook.conn
    for kind in KINDS.values():
        pages = client.get_paginator(kind.list_method).paginate(
            CreationTimeAfter=since, PaginationConfig={"PageSize": PAGE_SIZE}
        )
        for page in pages:
            for summary in page.get(kind.summaries_field, []):
                counts.listed += 1
                name = summary[kind.name_field]
                if known.has(name, region):
                    counts.already += 1
                    continue
                if not job_status.has_ended(summary.get(kind.status_field)):
                    counts.running += 1  # not over yet: the task records it when it ends
                    continue
                tags = hook.job_tags(summary[kind.arn_field])
                if tagging.DAG_ID not in tags or tagging.TASK_ID not in tags:
                    counts.not_ours += 1
                    continue
                view = JobView.parse(kind, hook.describe_job(kind, name))
                entry = ledger_entry.entry_for(
                    JobFacts.of(view, region),
                    dag_id=tags[tagging.DAG_ID],
                    task_id=tags[tagging.TASK_ID],
                    run_id=tags.get(tagging.RUN_ID, ""),
                    map_index=int(tags.get(tagging.MAP_INDEX, "-1") or -1),
                    source="backfill",
                )
                if ledger_writing.write(entry, root):
                    counts.added += 1
                    known.add(name, region)
    return counts
