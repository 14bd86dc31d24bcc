"""The nightly window [D 02:00, D+1 02:00) UTC."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.window import Window, last_complete_window, make_window, parse_day, window_for_date

UTC = dt.UTC
DAY = dt.timedelta(days=1)


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_window_for_date():
    w = window_for_date(dt.date(2024, 3, 10))
    assert w == Window(utc(2024, 3, 10, 2), utc(2024, 3, 11, 2))
    assert w.start.utcoffset() == dt.timedelta(0)
    assert w.end - w.start == DAY


def test_window_for_date_crosses_month_year_and_leap_day():
    assert window_for_date(dt.date(2023, 12, 31)).end == utc(2024, 1, 1, 2)
    assert window_for_date(dt.date(2024, 2, 28)).end == utc(2024, 2, 29, 2)
    assert window_for_date(dt.date(2024, 2, 29)).end == utc(2024, 3, 1, 2)


def test_consecutive_windows_tile_without_gap_or_overlap():
    day = dt.date(2024, 3, 10)
    assert window_for_date(day).end == window_for_date(day + DAY).start


def test_window_str_is_half_open():
    assert str(window_for_date(dt.date(2024, 3, 10))) == "[2024-03-10T02:00:00+00:00, 2024-03-11T02:00:00+00:00)"


def test_last_complete_window_just_before_cutoff():
    # 01:59:59.999999 on the 11th: the window ending at 02:00 on the 11th has not ended yet.
    now = utc(2024, 3, 11, 1, 59, 59, 999999)
    assert last_complete_window(now) == window_for_date(dt.date(2024, 3, 9))


def test_last_complete_window_at_cutoff():
    # Exactly 02:00: the half-open window [10th 02:00, 11th 02:00) is complete.
    assert last_complete_window(utc(2024, 3, 11, 2)) == window_for_date(dt.date(2024, 3, 10))


def test_last_complete_window_just_after_cutoff():
    assert last_complete_window(utc(2024, 3, 11, 2, 0, 1)) == window_for_date(dt.date(2024, 3, 10))
    assert last_complete_window(utc(2024, 3, 11, 23, 59)) == window_for_date(dt.date(2024, 3, 10))


def test_last_complete_window_across_new_year():
    assert last_complete_window(utc(2024, 1, 1, 0, 30)) == window_for_date(dt.date(2023, 12, 30))
    assert last_complete_window(utc(2024, 1, 1, 3)) == window_for_date(dt.date(2023, 12, 31))


def test_naive_datetime_is_taken_as_utc():
    naive = dt.datetime(2024, 3, 11, 1, 30)
    assert last_complete_window(naive) == last_complete_window(naive.replace(tzinfo=UTC))
    assert last_complete_window(naive) == window_for_date(dt.date(2024, 3, 9))
    w = make_window(dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 2))
    assert w == Window(utc(2024, 3, 1), utc(2024, 3, 2))
    assert w.start.tzinfo is not None


def test_non_utc_aware_datetime_is_converted():
    # 21:30 at UTC-5 on the 10th is 02:30 UTC on the 11th: the window of the 10th has just ended.
    est = dt.timezone(dt.timedelta(hours=-5))
    assert last_complete_window(dt.datetime(2024, 3, 10, 21, 30, tzinfo=est)) == window_for_date(dt.date(2024, 3, 10))
    # 03:30 at UTC+2 on the 11th is 01:30 UTC on the 11th: still the window of the 9th.
    cest = dt.timezone(dt.timedelta(hours=2))
    assert last_complete_window(dt.datetime(2024, 3, 11, 3, 30, tzinfo=cest)) == window_for_date(dt.date(2024, 3, 9))


def test_make_window_converts_aware_to_utc():
    ist = dt.timezone(dt.timedelta(hours=5, minutes=30))
    w = make_window(dt.datetime(2024, 3, 1, 7, 30, tzinfo=ist), dt.datetime(2024, 3, 1, 8, 30, tzinfo=ist))
    assert w == Window(utc(2024, 3, 1, 2), utc(2024, 3, 1, 3))
    assert w.start.utcoffset() == dt.timedelta(0) and w.end.utcoffset() == dt.timedelta(0)


def test_make_window_rejects_end_not_after_start():
    start = utc(2024, 3, 1, 2)
    with pytest.raises(ValueError, match="must be after"):
        make_window(start, start)
    with pytest.raises(ValueError, match="must be after"):
        make_window(start, start - dt.timedelta(microseconds=1))
    # Equal instants written in different zones are still an empty window.
    plus_one = dt.timezone(dt.timedelta(hours=1))
    with pytest.raises(ValueError, match="must be after"):
        make_window(start, dt.datetime(2024, 3, 1, 3, tzinfo=plus_one))
    assert make_window(start, start + dt.timedelta(microseconds=1)).end > start


def test_parse_day():
    assert parse_day("2024-02-29") == dt.date(2024, 2, 29)


@pytest.mark.parametrize("text", ["", "yesterday", "2024-13-01", "2023-02-29", "2024-03-32", "03/10/2024", "2024-3-1x"])
def test_parse_day_errors(text):
    with pytest.raises(ValueError, match="YYYY-MM-DD") as err:
        parse_day(text)
    assert repr(text) in str(err.value)


naive_or_aware = st.datetimes(
    min_value=dt.datetime(2000, 1, 2),
    max_value=dt.datetime(2100, 1, 1),
    timezones=st.sampled_from([None, UTC, dt.timezone(dt.timedelta(hours=-8)), dt.timezone(dt.timedelta(hours=9))]),
)


@given(naive_or_aware)
def test_last_complete_window_is_the_latest_window_ended_by_now(now):
    now_utc = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    w = last_complete_window(now)
    assert w == window_for_date(w.start.date())
    assert w.end <= now_utc < w.end + DAY  # ended, and the next one has not
