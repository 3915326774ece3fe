"""The ports local stacks hand their servers: below the kernel's ephemeral range, and never the same one to two
test processes at once (the race behind CI's "[Errno 98] address already in use")."""

from __future__ import annotations

import fcntl
import socket
import subprocess
import sys

import pytest

from sm_prefs_devkit import ports


def test_the_ports_lie_below_the_range_the_kernel_picks_outgoing_ports_from(tmp_path):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    assert ports.below_ephemeral_range(range_file) == range(ports.LOWEST_PORT, 32768)
    port = ports.free_port()
    assert ports.LOWEST_PORT <= port < ports.below_ephemeral_range().stop


def test_an_unreadable_range_leaves_the_choice_to_the_kernel(tmp_path, monkeypatch):
    assert ports.below_ephemeral_range(tmp_path / "missing") == range(0)
    (tmp_path / "garbled").write_text("not a range")
    assert ports.below_ephemeral_range(tmp_path / "garbled") == range(0)
    monkeypatch.setattr(ports, "below_ephemeral_range", lambda: range(0))
    with socket.socket() as server:
        server.bind(("127.0.0.1", ports.free_port()))  # a port the kernel says is free


def test_a_port_is_handed_out_once_in_a_process():
    handed = [ports.free_port() for _ in range(5)]
    assert len(set(handed)) == 5
    with pytest.raises(ports.NoFreePort, match="in use or reserved"):
        ports.first_free(handed)


def test_another_process_skips_the_ports_this_one_holds_even_though_nobody_listens_on_them():
    held = [ports.free_port(), ports.free_port()]
    script = (
        "import sys; from sm_prefs_devkit import ports\n"
        "held = [int(p) for p in sys.argv[1:]]\n"
        "try:\n    ports.first_free(held)\nexcept ports.NoFreePort:\n    print('none')\n"
        "print(ports.free_port() not in held)\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", script, *map(str, held)], capture_output=True, text=True, timeout=60, check=True
    )
    assert answer.stdout.split() == ["none", "True"]


def test_a_port_someone_listens_on_is_skipped_and_its_lock_let_go():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        with pytest.raises(ports.NoFreePort):
            ports.first_free([taken])
        with open(ports.LOCK_FOLDER / str(taken), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the failed try kept the lock
