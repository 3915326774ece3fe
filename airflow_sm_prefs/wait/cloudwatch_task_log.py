"""A trigger's job lines in the task try's own CloudWatch stream, when Airflow keeps task logs in CloudWatch.

With ``[logging] remote_logging`` to CloudWatch, a worker puts a try's lines in one stream of the configured
group, named after the try's log file; a trigger's lines go to a stream of their own (the file name with
``.trigger.<triggerer id>.log``), and Airflow's CloudWatch reader shows the try's stream only: once the task
has finished, the UI has lost what its trigger logged (apache/airflow#70317; MWAA patched its images). The
job's lines are what teams look for, so a trigger puts them in the try's stream itself, beside the worker's
lines, and not in its own: shown once, whether or not the reader learns to read triggers' streams.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

SCHEME = "cloudwatch"
LOGGER_NAME = "airflow_sm_prefs.job_log"
# PutLogEvents' limits (CloudWatch Logs API reference, PutLogEvents).
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
EVENT_OVERHEAD_BYTES = 26


@dataclass(frozen=True)
class TryStream:
    """The CloudWatch stream that Airflow's reader shows for one task try."""

    group: str
    region: str
    stream: str
    conn_id: str | None

    async def put(self, lines: Sequence[str], level: str = "info") -> None:
        """The lines as events of the try's stream, in the JSON the reader renders (as the worker's lines)."""
        from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

        from airflow_sm_prefs.sagemaker.hooks import async_client

        now = int(time.time() * 1000)
        messages = [json.dumps({"event": line, "level": level, "logger": LOGGER_NAME}) for line in lines]
        hook = AwsLogsHook(aws_conn_id=self.conn_id, region_name=self.region)
        async with await async_client(hook) as client:
            for batch in batches(messages):
                events = [{"timestamp": now, "message": message} for message in batch]
                try:
                    await client.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=events)
                except client.exceptions.ResourceNotFoundException:
                    # The worker creates the stream with its first line; a try that logged nothing yet has none.
                    await client.create_log_stream(logGroupName=self.group, logStreamName=self.stream)
                    await client.put_log_events(logGroupName=self.group, logStreamName=self.stream, logEvents=events)


def batches(messages: Sequence[str]) -> list[list[str]]:
    """The messages in PutLogEvents-sized calls: at most 10,000 events and 1,048,576 bytes each (a message's
    UTF-8 bytes plus 26), CloudWatch's limits."""
    found: list[list[str]] = []
    size = 0
    for message in messages:
        cost = len(message.encode()) + EVENT_OVERHEAD_BYTES
        if not found or len(found[-1]) == MAX_BATCH_EVENTS or size + cost > MAX_BATCH_BYTES:
            found.append([])
            size = 0
        found[-1].append(message)
        size += cost
    return found


def group_of(remote_base_log_folder: str) -> tuple[str, str] | None:
    """(group, Region) of a ``cloudwatch://arn:aws:logs:<region>:<account>:log-group:<group>`` setting, as
    the amazon provider reads it; None for any other remote location."""
    parts = urlsplit(remote_base_log_folder)
    if parts.scheme != SCHEME:
        return None
    arn = (parts.netloc + parts.path).split(":")
    if len(arn) < 7 or arn[5] != "log-group" or not arn[6]:
        return None
    return arn[6], arn[3]


def try_stream(task_instance: Any) -> TryStream | None:
    """Where a trigger of ``task_instance`` puts its job's lines; None (the trigger's own log) when task logs are
    not in CloudWatch or the trigger runs outside a triggerer."""
    from airflow.configuration import conf

    if task_instance is None or not getattr(task_instance, "run_id", None):
        return None
    if not conf.getboolean("logging", "remote_logging", fallback=False):
        return None
    located = group_of(conf.get("logging", "remote_base_log_folder", fallback="") or "")
    if located is None:
        return None
    from airflow.utils.helpers import log_filename_template_renderer

    # The name the worker's stream has: its log file's path under the base folder, ":" replaced as the
    # provider replaces it.
    file_name = log_filename_template_renderer()(ti=task_instance, try_number=task_instance.try_number)
    group, region = located
    conn_id = conf.get("logging", "remote_log_conn_id", fallback=None) or None
    return TryStream(group, region, file_name.replace(":", "_"), conn_id)
