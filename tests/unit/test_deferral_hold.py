"""The hold between a deferral and its trigger's event: the setting, and the arithmetic the trigger runs on."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_sm_prefs.wait import deferral_hold

AT = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def test_unset_the_hold_is_twice_the_longest_report_delay_measured():
    assert deferral_hold.parse_seconds(None) == deferral_hold.parse_seconds("  ") == 90.0


@pytest.mark.parametrize(("raw", "seconds"), [("0", 0.0), ("12.5", 12.5), ("3600", 3600.0)])
def test_a_number_of_seconds_is_taken_as_given(raw, seconds):
    assert deferral_hold.parse_seconds(raw) == seconds


@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "3601", "ninety", "1e309"])
def test_a_setting_it_cannot_use_is_refused_naming_the_option(raw):
    with pytest.raises(deferral_hold.HoldSettingError, match=r"\[sm_prefs\] deferral_hold_seconds = "):
        deferral_hold.parse_seconds(raw)


def test_the_setting_is_read_from_airflows_configuration(monkeypatch):
    monkeypatch.setenv("AIRFLOW__SM_PREFS__DEFERRAL_HOLD_SECONDS", "7")
    assert deferral_hold.configured_seconds() == 7.0


def test_the_hold_ends_that_many_seconds_after_the_deferral_and_counts_down_to_zero():
    until = deferral_hold.hold_until(AT.isoformat(), 90)
    assert until == "2026-12-06T12:01:30+00:00"
    assert deferral_hold.seconds_left(until, AT) == 90.0
    assert deferral_hold.seconds_left(until, AT + dt.timedelta(seconds=89.5)) == 0.5
    assert deferral_hold.seconds_left(until, AT + dt.timedelta(seconds=91)) == 0.0


def test_no_hold_delays_nothing():
    assert deferral_hold.hold_until(AT.isoformat(), 0) is None
    assert deferral_hold.hold_until(None, 90) is None, "a trigger of an earlier release: no deferral time"
    assert deferral_hold.seconds_left(None, AT) == 0.0
