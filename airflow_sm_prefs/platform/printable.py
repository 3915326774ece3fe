"""Text from outside (a job's log, a ledger object, a user's table) made safe to print: a terminal or a log view
must show it, not obey it."""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST) and two-character escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|\x9b[0-?]*[ -/]*[@-~]")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` without terminal escapes or control characters (they could rewrite what a reader's terminal or
    the log view shows), and cut to ``limit`` characters, saying how many more there were."""
    text = _ESCAPES.sub("", text)
    text = "".join(c if c.isprintable() or c == "\t" else "\ufffd" for c in text)
    if limit is not None and len(text) > limit:
        return f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text


def printable_lines(text: str) -> str:
    """``text`` made printable line by line, its line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))
