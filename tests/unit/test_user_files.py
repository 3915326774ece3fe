"""A user's file is parsed once, read again when it changes, and a failure to parse is not remembered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_sm_prefs.storage import user_files


def test_parsed_once_read_again_after_a_change_and_failures_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    reads: list[str] = []

    def parse(file: Path) -> int:
        text = file.read_text()
        reads.append(text)
        return int(text)

    path.write_text("1")
    assert user_files.parsed(path, parse) == 1
    assert user_files.parsed(path, parse) == 1
    assert reads == ["1"]

    path.write_text("oops")
    os.utime(path, (1_000_000, 1_000_000))  # a new modification time, whatever the clock's resolution
    with pytest.raises(ValueError):
        user_files.parsed(path, parse)
    with pytest.raises(ValueError):
        user_files.parsed(path, parse)  # the bad file is read again, not answered from memory
    path.write_text("2")
    os.utime(path, (2_000_000, 2_000_000))
    assert user_files.parsed(path, parse) == 2
    assert reads == ["1", "oops", "oops", "2"]

    path.unlink()
    with pytest.raises(OSError):
        user_files.parsed(path, parse)
