"""Text timestamps beyond ISO-8601 (inference.store.text_time): each shape read to the instant it means, and
every value without exactly one reading refused."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from inference.store.source_time import text_reading, to_instant
from inference.store.text_time import parse_text_time, reading

UTC = dt.UTC


def at(*fields, offset: float | None = None) -> dt.datetime:
    tz = None if offset is None else dt.timezone(dt.timedelta(hours=offset))
    return dt.datetime(*fields, tzinfo=tz)


@pytest.mark.parametrize(
    "text,expected",
    [
        # RFC 2822, as mail headers and many help desks' exports write it
        ("Mon, 30 Nov 2026 05:00:00 +0000", at(2026, 11, 30, 5, offset=0)),
        ("Mon, 30 Nov 2026 05:00:00 +0000 (UTC)", at(2026, 11, 30, 5, offset=0)),
        ("30 Nov 2026 05:00:00 GMT", at(2026, 11, 30, 5, offset=0)),
        ("Tue, 1 Dec 2026 00:15:00 -0500", at(2026, 12, 1, 0, 15, offset=-5)),
        ("Tue, 01 Dec 2026 00:15 EST", at(2026, 12, 1, 0, 15, offset=-5)),
        ("Tue, 01 Dec 2026 00:15:00 PDT", at(2026, 12, 1, 0, 15, offset=-7)),
        # numeric dates: the year first, or last with the order told by a number above 12, dots day-first
        ("2026/11/30 17:05:00", at(2026, 11, 30, 17, 5)),
        ("2026.11.30", at(2026, 11, 30)),
        ("30/11/2026 17:05", at(2026, 11, 30, 17, 5)),
        ("11/30/2026 5:05 PM", at(2026, 11, 30, 17, 5)),
        ("11-30-2026 12:00 AM", at(2026, 11, 30, 0, 0)),
        ("30.11.2026 17:05:06,25", at(2026, 11, 30, 17, 5, 6, 250000)),
        ("05.11.2026", at(2026, 11, 5)),  # dotted: day-first without a setting
        # English month names, with or without weekday, ordinal, comma and "at"
        ("Nov 30, 2026 5:05 PM", at(2026, 11, 30, 17, 5)),
        ("30-Nov-2026 17:05:00", at(2026, 11, 30, 17, 5)),
        ("30 November 2026", at(2026, 11, 30)),
        ("November 30th, 2026 at 12:00 am", at(2026, 11, 30, 0, 0)),
        ("Monday, November 30, 2026 5:05:06 p.m. EST", at(2026, 11, 30, 17, 5, 6, offset=-5)),
        ("Sept. 3, 2026", at(2026, 9, 3)),
        # month names as exports in other languages write them (accents optional), with their weekdays and words
        ("Montag, 30. November 2026, 17:05 Uhr", at(2026, 11, 30, 17, 5)),
        ("30. März 2026 um 17:05:06", at(2026, 3, 30, 17, 5, 6)),
        ("30 Maerz 2026", at(2026, 3, 30)),
        ("3. Jän. 2026", at(2026, 1, 3)),  # Austrian
        ("lundi 30 novembre 2026 à 17h05", at(2026, 11, 30, 17, 5)),
        ("1er févr. 2026 17:05 UTC", at(2026, 2, 1, 17, 5, offset=0)),
        ("1 fevrier 2026", at(2026, 2, 1)),
        ("sábado, 28 de noviembre de 2026 a las 17:05", at(2026, 11, 28, 17, 5)),
        ("30 dic. 2026 17:05 +01:00", at(2026, 12, 30, 17, 5, offset=1)),
        ("30 dicembre 2026 alle 17:05", at(2026, 12, 30, 17, 5)),
        ("mar 3 mar 2026", at(2026, 3, 3)),  # Tuesday (French, Spanish, Italian) the 3rd of March
        ("30 mrt. 2026 om 09:15", at(2026, 3, 30, 9, 15)),
        ("zo 29 nov 2026", at(2026, 11, 29)),
        ("domingo, 29 de novembro de 2026 às 17:05", at(2026, 11, 29, 17, 5)),
        ("30 out. 2026", at(2026, 10, 30)),  # Portuguese October
        # the clock before the year: C's asctime, Unix `date`, Java's Date.toString
        ("Mon Nov 30 05:00:00 2026", at(2026, 11, 30, 5)),
        ("Mon Nov 30 05:00:00 UTC 2026", at(2026, 11, 30, 5, offset=0)),
        ("Sun Nov  1 17:05:00 EST 2026", at(2026, 11, 1, 17, 5, offset=-5)),
        # IANA zone names: bare (a local time there), or after an offset as Java writes it (the offset decides)
        ("2026-11-30T05:00:00+01:00[Europe/Berlin]", at(2026, 11, 30, 5, offset=1)),
        ("2026-11-30 05:00:00 America/Argentina/Buenos_Aires", at(2026, 11, 30, 5, offset=-3)),
        ("2026-11-30 05:00 [Etc/GMT+5]", at(2026, 11, 30, 5, offset=-5)),
        ("2026-11-30 05:00 America/New_York", at(2026, 11, 30, 5, offset=-5)),  # "Am..." is no AM
        ("2026-11-30 5:00 am America/New_York", at(2026, 11, 30, 5, offset=-5)),
        # ISO-8601 beyond what a text range can narrow: zone names, commas, spaces around it
        ("2026-11-30 05:00:00 UTC", at(2026, 11, 30, 5, offset=0)),
        ("2026-11-30T05:00:00,5Z", at(2026, 11, 30, 5, 0, 0, 500000, offset=0)),
        ("2026-11-30 05:00 UTC+5:30", at(2026, 11, 30, 5, offset=5.5)),
        ("  2026-11-30 05:00:00  ", at(2026, 11, 30, 5)),
        ("2026-11-30 05:00:00.123456789+01:00", at(2026, 11, 30, 5, 0, 0, 123456, offset=1)),
    ],
)
def test_each_shape_reads_to_what_it_means(text, expected):
    got = parse_text_time(text)
    assert got == expected and got.utcoffset() == expected.utcoffset()
    assert reading(text) in ("read", "dmy", "mdy")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "soon",
        "1764468000",  # digits are no text shape: source_time reads them as Unix times (below)
        "30/11/26 05:00",  # two-digit year: which century?
        "5:00 PM",  # no date
        "2026-02-30",  # no such day
        "Nov 31, 2026",
        "13/13/2026",
        "30 Foo 2026",  # no month name
        "30 de 2026",
        "30 de de noviembre 2026",
        "30. Brumaire 2026",
        "lundi 30 novembre 2026 à 25h05",
        "Mond, 30 Nov 2026",  # no weekday
        "2026-11-30 05:00 Uhr PM",
        "2026-11-30 13:00 PM",  # PM with a 24-hour clock
        "2026-11-30 00:30 AM",
        "2026-11-30 05:00 CET",  # zone abbreviations other than RFC 2822's mean different offsets
        "2026-11-30 05:00 IST",
        "Mon Nov 30 05:00:00 CET 2026",
        "2026-11-30 05:00 Mars/Olympus",  # no such zone
        "2026-11-30 05:00 ../../etc/passwd",
        "2026-11-30 05:00 +1500",  # beyond any zone
        "2026-11-30 05:00 EST+1",
        "2026-11-30 25:00",
        "2026-11-30 05:61",
    ],
)
def test_values_without_one_reading_are_refused(text):
    with pytest.raises(ValueError):
        parse_text_time(text)
    assert reading(text) == "unreadable"
    assert reading(text, "dmy") == "unreadable"


def test_numeric_dates_that_read_both_ways_need_the_date_order():
    with pytest.raises(ValueError, match="date order"):
        parse_text_time("05/11/2026 10:00")
    assert reading("05/11/2026 10:00") == "either"
    assert parse_text_time("05/11/2026 10:00", "dmy") == at(2026, 11, 5, 10)
    assert parse_text_time("05/11/2026 10:00", "mdy") == at(2026, 5, 11, 10)
    assert reading("05/11/2026", "mdy") == "read"


def test_the_date_order_reads_each_value_and_refuses_what_contradicts_it():
    assert reading("30/11/2026") == "dmy" and reading("11/30/2026") == "mdy"
    assert reading("30/11/2026", "mdy") == "unreadable"
    with pytest.raises(ValueError):
        parse_text_time("30/11/2026", "mdy")
    assert parse_text_time("30.11.2026", "mdy") == at(2026, 11, 30)  # dotted dates are day-first always
    assert reading("30.11.2026", "mdy") == "read"


def test_to_instant_reads_other_shapes_in_the_sources_zone_and_order():
    berlin = dt.timezone(dt.timedelta(hours=1))  # CET in November
    assert to_instant("05/11/2026 10:00", berlin, "dmy") == at(2026, 11, 5, 9, offset=0)
    assert to_instant("Mon, 30 Nov 2026 05:00:00 -0500", berlin) == at(2026, 11, 30, 10, offset=0)
    assert to_instant("2026-11-30 05:00:00", berlin) == at(2026, 11, 30, 4, offset=0)  # ISO: as before
    with pytest.raises(ValueError):
        to_instant("05/11/2026 10:00", UTC)


def test_a_zone_name_reads_local_time_there_across_dst():
    berlin = "Europe/Berlin"
    assert to_instant(f"2026-07-01 12:00 {berlin}", UTC) == at(2026, 7, 1, 10, offset=0)  # CEST
    assert to_instant(f"2026-11-30 12:00 {berlin}", UTC) == at(2026, 11, 30, 11, offset=0)  # CET
    assert to_instant(f"2026-10-25 02:30 {berlin}", UTC) == at(2026, 10, 25, 0, 30, offset=0)  # first occurrence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1796004000", at(2026, 11, 30, 2, offset=0)),  # seconds
        ("1796004000.25", at(2026, 11, 30, 2, 0, 0, 250000, offset=0)),
        ("1796004000123", at(2026, 11, 30, 2, 0, 0, 123000, offset=0)),  # milliseconds
        (" 1796004000123456 ", at(2026, 11, 30, 2, 0, 0, 123456, offset=0)),  # microseconds
        ("1796004000123456789", at(2026, 11, 30, 2, 0, 0, 123456, offset=0)),  # nanoseconds, cut to µs
        ("1796004000.1234567", at(2026, 11, 30, 2, 0, 0, 123456, offset=0)),  # cut as well, never rounded up
    ],
)
def test_unix_times_written_as_digits_read_by_magnitude_as_numbers_do(text, expected):
    # CSV imports into text columns and JSON APIs leave Unix times as text
    number = Decimal(text) if "." in text else int(text)  # as a number column would hold it
    assert to_instant(text, UTC) == expected == to_instant(number, UTC)
    assert text_reading(text) == "read"


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # ISO-8601's basic format (LDAP, iCalendar, SAP): outside every Unix unit's span, so never a Unix time
        ("20261130", at(2026, 11, 30)),
        ("20261130T050000Z", at(2026, 11, 30, 5, offset=0)),
        ("20261130050000", at(2026, 11, 30, 5)),
        ("202611300500+0100", at(2026, 11, 30, 5, offset=1)),
        ("20261130T050000,25-0500", at(2026, 11, 30, 5, 0, 0, 250000, offset=-5)),
    ],
)
def test_the_basic_format_reads_as_the_date_it_writes(text, expected):
    got = to_instant(text, UTC)
    assert got == expected.astimezone(UTC) if expected.tzinfo else got == expected.replace(tzinfo=UTC)
    assert text_reading(text) == "read"


@pytest.mark.parametrize("text", ["20261330", "0", "42", "1.5", "-1796004000", "1796004000e3", "1_796_004_000"])
def test_digits_of_no_plausible_unix_time_are_refused(text):
    with pytest.raises(ValueError):
        to_instant(text, UTC)
    assert text_reading(text) == "unreadable"


def test_no_month_name_or_abbreviation_means_two_months():
    from inference.store.text_time import _MONTH_NAMES, _MONTHS

    names = [name for names in _MONTH_NAMES for name in names]
    assert len(names) == len(set(names)) == len(_MONTHS)
    assert all(name.isascii() and name.isalpha() and name == name.lower() for name in names)  # matched folded
