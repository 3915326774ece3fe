"""CloudWatch Logs on the emulator's endpoint: the log groups and streams the emulated jobs write.

Serves what clients that follow a job's log use (the amazon provider's ``print_log``, sagemaker-core's
``wait(logs=True)``, this project's log streaming): ``DescribeLogGroups``, ``DescribeLogStreams``,
``GetLogEvents`` and ``FilterLogEvents``, checked against botocore's ``logs`` model, with their pagination
tokens. A group exists once a job of its kind has started in the Region; a stream once its instance has.
``filterPattern`` is not modelled and is refused rather than ignored. The jobs' groups are the jobs' own:
writing to one is refused. Every other group (Airflow's remote task logs) is the client's, kept by moto
(``log_groups.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sm_prefs_devkit.emulator import paging
from sm_prefs_devkit.emulator.errors import AccessDeniedException, ServiceError, UnknownOperationException, shorten
from sm_prefs_devkit.emulator.kinds import KINDS
from sm_prefs_devkit.emulator.log_groups import WRITES, LogGroupStore
from sm_prefs_devkit.emulator.model import Job

if TYPE_CHECKING:
    from sm_prefs_devkit.emulator.service import Backends

TARGET_PREFIX = "Logs_20140328"
SERVICE = "logs"
READS = ("DescribeLogGroups", "DescribeLogStreams", "GetLogEvents", "FilterLogEvents")
KNOWN = (*READS, *WRITES)
DEFAULT_EVENT_LIMIT = 10_000
DEFAULT_STREAM_LIMIT = 50
GROUP_KINDS = {kind.log_group: kind.name for kind in KINDS.values()}


class ResourceNotFoundException(ServiceError):
    code = "ResourceNotFoundException"


class InvalidParameterException(ServiceError):
    code = "InvalidParameterException"


@dataclass(frozen=True)
class Event:
    timestamp: int
    stream: str
    message: str
    position: int  # its place in the stream, which makes an id and a token


def call(
    operation: str,
    request: dict[str, Any],
    jobs: Iterable[Job],
    account_id: str,
    region: str,
    log_groups: LogGroupStore | None = None,
) -> dict[str, Any]:
    """One CloudWatch Logs call (already checked against the model) over the jobs of the request's Region; the
    client's own groups (``log_groups``: None when moto is not installed) are listed with the jobs' ones, and
    answered by ``answer`` before it gets here."""
    if operation not in KNOWN:
        raise UnknownOperationException(
            f"{TARGET_PREFIX}.{shorten(operation)} is not supported by the airflow-sm-prefs emulator; of CloudWatch "
            f"Logs it implements {', '.join(KNOWN)}."
        )
    started = [job for job in jobs if job.streams]
    if operation == "DescribeLogGroups":
        return _describe_groups(request, started, account_id, region, log_groups)
    group = request["logGroupName"]
    kind = GROUP_KINDS.get(group)
    if kind is None:  # no store of the client's groups: ``answer`` sends every other group to the store
        raise ResourceNotFoundException(
            "The specified log group does not exist (groups other than the jobs' need moto: pip install 'moto[s3]')."
        )
    if operation in WRITES:
        raise AccessDeniedException(f"log group {group} is written by the emulated jobs only")
    in_group = [job for job in started if job.kind == kind]
    if not in_group:
        raise ResourceNotFoundException("The specified log group does not exist.")
    if operation == "DescribeLogStreams":
        return _describe_streams(request, in_group, account_id, region)
    if operation == "GetLogEvents":
        return _get_events(request, in_group)
    return _filter_events(request, in_group)


def _describe_groups(
    request: dict[str, Any], jobs: list[Job], account_id: str, region: str, log_groups: LogGroupStore | None
) -> dict[str, Any]:
    prefix = request.get("logGroupNamePrefix") or ""
    kinds = {job.kind for job in jobs}
    groups = sorted(group for group, kind in GROUP_KINDS.items() if kind in kinds and group.startswith(prefix))
    described = [
        {
            "logGroupName": group,
            "arn": f"arn:aws:logs:{region}:{account_id}:log-group:{group}:*",
            "creationTime": min(job.log[0][0] for job in jobs if KINDS[job.kind].log_group == group and job.log),
            "storedBytes": 0,
        }
        for group in groups
    ]
    if log_groups is not None:
        described += log_groups.groups(region, prefix)
    return {"logGroups": sorted(described, key=lambda group: group["logGroupName"])}


def _streams(jobs: list[Job]) -> dict[str, list[Event]]:
    streams: dict[str, list[Event]] = {}
    for job in jobs:
        for name in job.streams:
            streams[name] = []
        for timestamp, stream, message in job.log:
            events = streams[stream]
            events.append(Event(timestamp, stream, message, len(events)))
    return streams


def _jobs_named_by(jobs: list[Job], prefix: str) -> list[Job]:
    """The jobs whose streams can start with ``prefix`` (a stream name starts with its job's name)."""
    head = prefix.split("/", 1)[0]
    if "/" in prefix:
        return [job for job in jobs if job.name == head]
    return [job for job in jobs if job.name.startswith(head)]


def _describe_streams(request: dict[str, Any], jobs: list[Job], account_id: str, region: str) -> dict[str, Any]:
    prefix = request.get("logStreamNamePrefix") or ""
    order = request.get("orderBy") or "LogStreamName"
    if prefix and order != "LogStreamName":
        raise InvalidParameterException("Cannot order by LastEventTime with a logStreamNamePrefix.")
    streams = {
        name: events
        for name, events in _streams(_jobs_named_by(jobs, prefix) if prefix else jobs).items()
        if name.startswith(prefix)
    }

    def sort_key(name: str) -> Any:
        return name if order == "LogStreamName" else (streams[name][-1].timestamp if streams[name] else 0, name)

    names = sorted(streams, key=sort_key, reverse=bool(request.get("descending")))
    offset = paging.offset(request.get("nextToken"), request, "describe", InvalidParameterException)
    limit = request.get("limit") or DEFAULT_STREAM_LIMIT
    page = names[offset : offset + limit]
    group = request["logGroupName"]
    result: dict[str, Any] = {
        "logStreams": [_stream_summary(name, streams[name], group, account_id, region) for name in page]
    }
    if offset + limit < len(names):
        result["nextToken"] = paging.token(request, "describe", offset + limit)
    return result


def _stream_summary(name: str, events: list[Event], group: str, account_id: str, region: str) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "logStreamName": name,
        "creationTime": int(name.rsplit("-", 1)[1]) * 1000,
        "arn": f"arn:aws:logs:{region}:{account_id}:log-group:{group}:log-stream:{name}",
        "storedBytes": 0,
    }
    if events:
        summary.update(
            firstEventTimestamp=events[0].timestamp,
            lastEventTimestamp=events[-1].timestamp,
            lastIngestionTime=events[-1].timestamp,
        )
    return summary


def _in_window(event: Event, request: dict[str, Any]) -> bool:
    start, end = request.get("startTime"), request.get("endTime")
    return (start is None or event.timestamp >= start) and (end is None or event.timestamp < end)


def _get_events(request: dict[str, Any], jobs: list[Job]) -> dict[str, Any]:
    name = request["logStreamName"]
    events = _streams(_jobs_named_by(jobs, name)).get(name)
    if events is None:
        raise ResourceNotFoundException("The specified log stream does not exist.")
    window = [event for event in events if _in_window(event, request)]
    limit = request.get("limit") or DEFAULT_EVENT_LIMIT
    token = request.get("nextToken")
    if token:
        direction, position = _stream_position(token, name)
        if direction == "f":
            page = [event for event in window if event.position >= position][:limit]
        else:
            page = [event for event in window if event.position < position][-limit:]
    elif request.get("startFromHead"):
        page = window[:limit]
    else:
        page = window[-limit:]
    # At either end the token given is the token returned: how a client knows it has read everything.
    forward = page[-1].position + 1 if page else (position if token and direction == "f" else len(events))
    backward = page[0].position if page else (position if token and direction == "b" else 0)
    return {
        "events": [{"timestamp": e.timestamp, "message": e.message, "ingestionTime": e.timestamp} for e in page],
        "nextForwardToken": _stream_token("f", name, forward),
        "nextBackwardToken": _stream_token("b", name, backward),
    }


def _filter_events(request: dict[str, Any], jobs: list[Job]) -> dict[str, Any]:
    if request.get("filterPattern"):
        raise InvalidParameterException("The emulator does not model filterPattern; filter the events yourself.")
    names = request.get("logStreamNames")
    prefix = request.get("logStreamNamePrefix")
    if names and prefix:
        raise InvalidParameterException("logStreamNames and logStreamNamePrefix are mutually exclusive.")
    candidates = jobs
    if prefix:
        candidates = _jobs_named_by(jobs, prefix)
    elif names:
        candidates = [job for job in jobs if any(name.split("/", 1)[0] == job.name for name in names)]
    streams = _streams(candidates)
    if names:
        streams = {name: events for name, events in streams.items() if name in names}
    elif prefix:
        streams = {name: events for name, events in streams.items() if name.startswith(prefix)}
    events = sorted(
        (event for stream in streams.values() for event in stream if _in_window(event, request)),
        key=lambda e: (e.timestamp, e.stream, e.position),
    )
    offset = paging.offset(request.get("nextToken"), request, "filter", InvalidParameterException)
    limit = request.get("limit") or DEFAULT_EVENT_LIMIT
    page = events[offset : offset + limit]
    result: dict[str, Any] = {
        "events": [
            {
                "logStreamName": e.stream,
                "timestamp": e.timestamp,
                "message": e.message,
                "ingestionTime": e.timestamp,
                "eventId": _event_id(e),
            }
            for e in page
        ],
        "searchedLogStreams": [{"logStreamName": name, "searchedCompletely": True} for name in sorted(streams)],
    }
    if offset + limit < len(events):
        result["nextToken"] = paging.token(request, "filter", offset + limit)
    return result


def _event_id(event: Event) -> str:
    digest = int(hashlib.sha256(event.stream.encode()).hexdigest()[:12], 16)
    return f"{event.timestamp:016d}{digest:015d}{event.position:010d}"


# -- tokens of one stream's events (listings use ``paging``) ----------------------------------------------------


def _stream_token(direction: str, stream: str, position: int) -> str:
    digest = hashlib.sha256(stream.encode()).hexdigest()[:12]
    return f"{direction}/{digest}{position:020d}"


def _stream_position(token: str, stream: str) -> tuple[str, int]:
    digest = hashlib.sha256(stream.encode()).hexdigest()[:12]
    direction, _, rest = token.partition("/")
    if direction not in ("f", "b") or not rest.startswith(digest) or not rest[12:].isdigit():
        raise InvalidParameterException("The specified nextToken is invalid for this log stream.")
    return direction, int(rest[12:])


def answer(backends: Backends, operation: str, request: dict[str, Any], region: str) -> dict[str, Any]:
    """The call over the engine's jobs of the Region, at the engine's present time; a call on a client's own
    group (Airflow puts its task logs there often) goes to the store without touching the jobs."""
    engine, log_groups = backends.engine, backends.log_groups
    group = request.get("logGroupName")
    if log_groups is not None and operation in KNOWN and isinstance(group, str) and group not in GROUP_KINDS:
        return log_groups.call(operation, request, region)
    with engine.lock:
        engine.advance()
        jobs = [job for job in engine.jobs.values() if job.region == region]
        return call(operation, request, jobs, engine.scenario.account_id, region, log_groups)
