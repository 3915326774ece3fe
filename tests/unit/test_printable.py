"""Text from outside, printed: no escape reaches the terminal, line breaks stay, long text is cut saying so."""

from __future__ import annotations

from airflow_sm_prefs.platform.printable import printable, printable_lines


def test_escapes_and_control_characters_are_gone_and_tabs_stay():
    assert printable("a\x1b[31mred\x1b[0m\tb\x07\x1b]0;title\x07c\r") == "ared\tb\ufffdc\ufffd"


def test_long_text_is_cut_saying_how_much_more_there_was():
    assert printable("x" * 12, limit=10) == "xxxxxxxxxx... (2 more characters)"
    assert printable("x" * 10, limit=10) == "x" * 10


def test_line_breaks_stay_and_each_line_is_cleaned():
    assert printable_lines("one\x1b[2J\ntwo\x08\n") == "one\ntwo\ufffd\n"
