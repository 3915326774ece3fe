"""What `make demo` says first and last, without starting its stack."""

from __future__ import annotations

from types import SimpleNamespace

from sm_prefs_devkit import demo
from sm_prefs_devkit.local_stack import StackError


def test_the_virtual_time_note_comes_before_anything_else(monkeypatch, capsys, tmp_path):
    class Unstartable:
        scenario = "nightly-weather"

        def __init__(self, **_: object) -> None:
            pass

        def __enter__(self) -> None:
            raise StackError("no port")

        def __exit__(self, *_: object) -> None:
            pass

    monkeypatch.setattr(demo, "LocalStack", Unstartable)
    assert demo.main(tmp_path, exit_when_done=True) == 1
    assert capsys.readouterr().out.splitlines()[0] == demo.VIRTUAL_TIME_NOTE
    assert "60x faster" in demo.VIRTUAL_TIME_NOTE


def test_the_ui_address_is_given_only_while_the_ui_stays_up():
    stack = SimpleNamespace(api_url="http://127.0.0.1:28080", admin_password=lambda: "s3cret")
    staying = "\n".join(demo.closing_lines(stack, exit_when_done=False))
    assert "http://127.0.0.1:28080/plugin/sm-prefs-capacity" in staying and "s3cret" in staying
    leaving = "\n".join(demo.closing_lines(stack, exit_when_done=True))
    assert "http://" not in leaving and "s3cret" not in leaving and "stop now" in leaving
