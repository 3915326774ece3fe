"""Ports for the servers a local stack starts, safe to hand out while other stacks start beside it.

Asking the kernel for port 0 and passing the answer on is a race: the port is free only until the asker closes
its probe. On a machine running several stacks at once, a busy one's outgoing connections take source ports
from that same ephemeral range, and one of them can take the port before the server binds it ("[Errno 98]
address already in use", seen in CI). So the ports come from below the ephemeral range, where the kernel never
picks a source port, and each is reserved for this process's life by a lock file, so a second test process
never hands out the same one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 20000  # above the well-known defaults a developer's own servers use (5432, 6379, 8080, ...)
LOCK_FOLDER = Path(tempfile.gettempdir()) / "airflow-sm-prefs-ports"

_held: dict[int, IO[str]] = {}  # the reservations this process holds, open until it exits


class NoFreePort(RuntimeError):
    """Every port below the ephemeral range is reserved or in use."""


def below_ephemeral_range(range_file: Path = EPHEMERAL_RANGE_FILE) -> range:
    """The ports the kernel never gives an outgoing connection: from LOWEST_PORT up to its ephemeral range.
    Empty where that range cannot be read or starts too low to leave room (then the kernel's pick is used)."""
    try:
        first_ephemeral = int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    return range(LOWEST_PORT, first_ephemeral)


def free_port() -> int:
    """A loopback port no process is listening on, that no other caller of this function will get while this
    process lives, and that no outgoing connection takes meanwhile."""
    candidates = below_ephemeral_range()
    if not candidates:
        return _kernels_pick()
    # Start somewhere of this process's own, so parallel test processes rarely try the same locks.
    start = (os.getpid() * 7919 + len(_held)) % len(candidates)
    return first_free([*candidates[start:], *candidates[:start]])


def first_free(candidates: Sequence[int]) -> int:
    """The first of ``candidates`` this process can reserve: not reserved by any process, nobody listening."""
    for port in candidates:
        if port not in _held and _reserve(port):
            return port
    raise NoFreePort(
        f"every port from {min(candidates)} to {max(candidates)} is in use or reserved; "
        f"remove stale locks in {LOCK_FOLDER} or stop the stacks still running"
    )


def _reserve(port: int) -> bool:
    LOCK_FOLDER.mkdir(parents=True, exist_ok=True)
    lock = open(LOCK_FOLDER / str(port), "w")  # noqa: SIM115 - held open for the process's life: the reservation
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        return False
    if not _bindable(port):
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        return False
    _held[port] = lock
    return True


def _bindable(port: int) -> bool:
    with socket.socket() as probe, contextlib.suppress(OSError):
        probe.bind(("127.0.0.1", port))
        return True
    return False


def _kernels_pick() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
