"""The pure parts of reading real sources (issue 12): ID keys, ISO-8601 text timestamps, the emptiness rule,
one row per ticket. The shapes themselves are built for real in tests/integration/test_source_shapes.py."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.store.source_keys import MAX_ID_BYTES, id_problem, sqlite_key, sqlite_values, surrogate_key
from inference.store.source_time import (
    _COMPACT_PLAUSIBLE,
    _PLAUSIBLE,
    compact_number,
    to_instant,
    unix_spans,
    window_number_spans,
)
from inference.textprep import has_text, model_input, visible

UTC = dt.UTC


@pytest.mark.parametrize(
    ("value", "key"),
    [
        (12, "12"),
        (-3, "-3"),
        (12.0, "12"),
        (3.5, "3.5"),
        (1e20, "1e+20"),
        ("12", "12"),
        ("007", "007"),
        ("A-7", "A-7"),
        (b"\xbe\xef", "X'BEEF'"),
        (None, None),
        (float("nan"), None),
    ],
)
def test_sqlite_keys(value, key):
    assert sqlite_key(value) == key
    if key is not None:
        assert any(sqlite_key(v) == key for v in sqlite_values(key)), "a key is looked up with its own value"


@given(st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.text()))
def test_every_sqlite_value_is_found_again_by_its_key(value):
    key = sqlite_key(value)
    values = sqlite_values(key)
    assert value in values or (isinstance(value, float) and value.is_integer() and int(value) in values)


def test_id_problems():
    assert id_problem("x" * MAX_ID_BYTES) is None
    assert id_problem("é" * (MAX_ID_BYTES // 2)) is None
    assert id_problem("x" * (MAX_ID_BYTES + 1)) == "longer than 512 bytes"
    assert id_problem("é" * (MAX_ID_BYTES // 2 + 1)) == "longer than 512 bytes"
    assert id_problem(None) == "null"
    assert id_problem("caf\udce9") == "not UTF-8"
    surrogate = surrogate_key("null", None, "a" * 64)
    assert surrogate.startswith("!unsupported-id:null:") and id_problem(surrogate) is None
    assert surrogate == surrogate_key("null", None, "a" * 64) != surrogate_key("null", None, "b" * 64)


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-11-30 03:00:00", dt.datetime(2026, 11, 30, 3, tzinfo=UTC)),
        ("2026-11-30 03:00:00.000000", dt.datetime(2026, 11, 30, 3, tzinfo=UTC)),
        ("2026-11-30T03:00", dt.datetime(2026, 11, 30, 3, tzinfo=UTC)),
        ("2026-11-30T03:00:00Z", dt.datetime(2026, 11, 30, 3, tzinfo=UTC)),
        ("2026-11-30 03:00:00+02:00", dt.datetime(2026, 11, 30, 1, tzinfo=UTC)),
        ("2026-11-30 03:00:00 -0530", dt.datetime(2026, 11, 30, 8, 30, tzinfo=UTC)),
        ("2026-11-30 03:00:00+00", dt.datetime(2026, 11, 30, 3, tzinfo=UTC)),
        ("2026-11-30 03:00:00.1234567z", dt.datetime(2026, 11, 30, 3, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-30", dt.datetime(2026, 11, 30, tzinfo=UTC)),
    ],
)
def test_iso_text_timestamps(text, instant):
    assert to_instant(text, UTC) == instant


@pytest.mark.parametrize("text", ["2026-11-30 03:00:00.", "2026-02-30 03:00", "20261330", "now", ""])
def test_unreadable_text_timestamps_raise(text):  # other text shapes: tests/unit/test_text_time.py
    with pytest.raises(ValueError):
        to_instant(text, UTC)


def test_naive_values_are_in_the_source_zone_first_occurrence_at_dst():
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    assert to_instant("2026-11-30 03:00:00", berlin) == dt.datetime(2026, 11, 30, 2, tzinfo=UTC)
    assert to_instant(dt.datetime(2026, 10, 25, 2, 30), berlin) == dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    aware = dt.datetime(2026, 11, 30, 3, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert to_instant(aware, berlin) == dt.datetime(2026, 11, 30, 8, tzinfo=UTC)  # an offset wins over the zone
    assert to_instant(1764468000, berlin) == dt.datetime(2025, 11, 30, 2, tzinfo=UTC)  # Unix times are UTC


SECOND = dt.datetime(2025, 11, 30, 2, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "value,instant",
    [
        (1764468000, SECOND.replace(microsecond=0)),  # seconds
        (1764468000123, SECOND.replace(microsecond=123000)),  # milliseconds
        (1764468000123456, SECOND),  # microseconds
        (1764468000123456789, SECOND),  # nanoseconds: below a microsecond is cut off
        (1764468000.123456, SECOND),  # seconds with a fraction (float)
        (Decimal("1764468000.123456"), SECOND),  # (numeric)
        (315532800, dt.datetime(1980, 1, 1, tzinfo=UTC)),  # the first plausible instant, each unit
        (315532800 * 10**9, dt.datetime(1980, 1, 1, tzinfo=UTC)),
        (7258118399, dt.datetime(2199, 12, 31, 23, 59, 59, tzinfo=UTC)),  # the last second, seconds and ms
        (7258118399999, dt.datetime(2199, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
    ],
)
def test_numbers_are_unix_times_in_the_unit_their_magnitude_tells(value, instant):
    assert to_instant(value, UTC) == instant


@pytest.mark.parametrize(
    "value", [0, 42, -1764468000, 315532799, 7258118400, 10**11 - 1, 10**20, float("nan"), float("inf"), True]
)
def test_numbers_that_are_no_plausible_unix_time_are_unreadable(value):
    with pytest.raises(ValueError):
        to_instant(value, UTC)


def test_unix_spans_hold_every_unit_of_a_window_and_no_more_than_a_unit_beyond():
    start, end = dt.datetime(2026, 11, 30, 2, tzinfo=UTC), dt.datetime(2026, 12, 1, 2, 0, 0, 500, tzinfo=UTC)
    spans = unix_spans(start, end)
    assert spans[0] == (1796004000, 1796090401)  # end's 500 µs round up to the next second
    assert spans[1] == (1796004000000, 1796090400001)
    assert spans[2] == (1796004000000000, 1796090400000500)
    assert spans[3] == (1796004000000000000, 1796090400000500000)
    import pendulum  # Airflow's windows are pendulum datetimes (in any zone)

    assert unix_spans(pendulum.instance(start), pendulum.instance(end).in_timezone("Asia/Kolkata")) == spans


@pytest.mark.parametrize(
    "value,local",
    [
        (20261130050000, dt.datetime(2026, 11, 30, 5)),  # SAP's DEC 15: YYYYMMDDhhmmss
        (Decimal("20261130050007"), dt.datetime(2026, 11, 30, 5, 0, 7)),  # (numeric)
        (20261130050000.0, dt.datetime(2026, 11, 30, 5)),  # (double precision)
        (202611300559, dt.datetime(2026, 11, 30, 5, 59)),  # YYYYMMDDhhmm
        (20261130, dt.datetime(2026, 11, 30)),  # a date key: YYYYMMDD
        (19800101, dt.datetime(1980, 1, 1)),
        (21991231235959, dt.datetime(2199, 12, 31, 23, 59, 59)),
    ],
)
def test_compact_dates_in_numbers_are_local_times(value, local):
    assert compact_number(value) == local
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    assert to_instant(value, berlin) == local.replace(tzinfo=berlin).astimezone(UTC)  # in the source's zone


@pytest.mark.parametrize(
    "value",
    [
        20261330050000,  # month 13
        20261131,  # 31 November
        20261130250000,  # hour 25
        202611300560,  # minute 60
        Decimal("20261130050000.5"),  # a fraction
        19791231,  # before 1980
        22010101,  # after 2200
        20261130050,  # eleven digits: no compact form, no Unix unit
        Decimal("NaN"),
        float("inf"),
    ],
)
def test_numbers_of_no_compact_date_and_no_unix_time_are_unreadable(value):
    assert compact_number(value) is None
    with pytest.raises(ValueError, match="YYYYMMDDhhmmss"):
        to_instant(value, UTC)


def test_compact_forms_and_unix_units_never_share_a_number():
    spans = sorted(_PLAUSIBLE + _COMPACT_PLAUSIBLE)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:], strict=False))


def test_window_number_spans_hold_the_compact_local_times_of_a_window():
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    start, end = dt.datetime(2026, 11, 30, 2, tzinfo=UTC), dt.datetime(2026, 12, 1, 2, tzinfo=UTC)
    spans = window_number_spans(start, end, berlin)
    assert spans[:4] == unix_spans(start, end)
    # 03:00 and 03:00 Berlin local, three hours of margin either side (a DST change moves local times)
    assert spans[4:] == [
        (20261130, 20261201 + 1),
        (202611300000, 202612010600 + 1),
        (20261130000000, 20261201060000 + 1),
    ]
    for instant in (start, end - dt.timedelta(seconds=1)):
        local = instant.astimezone(berlin)
        for digits, (lo, hi) in zip((8, 12, 14), spans[4:], strict=True):
            assert lo <= int(local.strftime("%Y%m%d%H%M%S")[:digits]) < hi


INVISIBLE_ONLY = ["\u200b", "\ufeff", "\u00ad", "\u2060", "\u200c\u200d\u200e", "\u3164", "\ufe0f", " \u2800 \t"]


@pytest.mark.parametrize("text", INVISIBLE_ONLY)
def test_invisible_only_text_is_empty(text):
    assert model_input(text, text, 1000) == (None, False)
    assert not has_text(text, text) and not visible(text)


def test_invisible_characters_next_to_visible_text_are_kept():
    family = "👨\u200d👩\u200d👧"
    assert model_input("\u200b", family, 100) == (family, False)  # the invisible subject is left out
    assert model_input("\ufeffHello", None, 100) == ("\ufeffHello", False)


@given(st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_has_text_is_model_input_not_none(subject, body):
    assert has_text(subject, body) == (model_input(subject, body, 10_000)[0] is not None)
