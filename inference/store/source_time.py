"""Source timestamps as instants: text (ISO-8601 as SQLite and other applications write it, and other shapes:
inference.store.text_time), naive values in a configured zone, numbers (Unix times, and compact local dates
such as SAP's and date keys'), and whether a database's zone name means UTC.

Unix times are numbers of seconds, milliseconds, microseconds or nanoseconds since 1970-01-01 UTC, told apart
by magnitude: each unit's plausible span (`UNIX_FROM` to `UNIX_UNTIL`, 1980 to 2200) lies orders of magnitude
away from every other unit's, so a value in one of the spans has one reading; any other number (a version
counter, 0, a negative) is no timestamp and is refused at start (`unix_spans`).

Compact dates written as numbers, as SAP keeps its DEC 15 timestamps, data warehouses their date keys and ERP
exports their dates (`compact_number`): YYYYMMDD, YYYYMMDDhhmm or YYYYMMDDhhmmss, local times in the source's
zone (TICKETS_SOURCE_TIMEZONE, as naive values are). Their plausible spans (1980 to 2200) lie below or between
the Unix units' spans (8 digits below seconds' 9 and 10; 12 digits below milliseconds' 3.2e11; 14 digits between
milliseconds' 7.3e12 and microseconds' 3.2e14), so a number still has at most one reading."""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
import zoneinfo
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from inference.store.text_time import parse_text_time, reading
from inference.window import UTC

UNIX_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
UNIX_FROM = dt.datetime(1980, 1, 1, tzinfo=UTC)
UNIX_UNTIL = dt.datetime(2200, 1, 1, tzinfo=UTC)
UNIX_UNITS = (1, 10**3, 10**6, 10**9)  # per second: seconds, milliseconds, microseconds, nanoseconds


def _in_unit(instant: dt.datetime, per_second: int) -> tuple[int, int]:
    """An instant as a Unix time in a unit, as the integers just below and just above (equal when exact).
    Integer arithmetic on the instant's fields: Airflow's windows are pendulum datetimes, whose differences
    do not divide by a timedelta."""
    micros = calendar.timegm(instant.utctimetuple()) * 10**6 + instant.microsecond
    low, rest = divmod(micros * per_second, 10**6)
    return low, low + (rest > 0)


def unix_spans(start: dt.datetime, end: dt.datetime) -> list[tuple[int, int]]:
    """[lo, hi) numeric ranges, one per unit, that hold every Unix time of the instants in [start, end) (a
    little more where a bound falls between two integers: callers check each row's instant exactly)."""
    return [(_in_unit(start, u)[0], _in_unit(end, u)[1]) for u in UNIX_UNITS]


def in_spans(col: sa.ColumnElement, spans: list[tuple[int, int]]) -> sa.ColumnElement[bool]:
    """SQL: `col` lies in one of the [lo, hi) ranges."""
    return sa.or_(*[sa.and_(col >= lo, col < hi) for lo, hi in spans])


def in_unix_spans(col: sa.ColumnElement, start: dt.datetime, end: dt.datetime) -> sa.ColumnElement[bool]:
    """SQL: `col` is a number within `unix_spans(start, end)` (PostgreSQL: a number column; SQLite: numbers sort
    before any text, so text values never match)."""
    return in_spans(col, unix_spans(start, end))


_PLAUSIBLE = unix_spans(UNIX_FROM, UNIX_UNTIL)
UNIX_TIME = (  # for messages
    f"a Unix time between {UNIX_FROM.year} and {UNIX_UNTIL.year} (in seconds, milliseconds, microseconds or "
    "nanoseconds, told apart by magnitude)"
)
NUMBER_TIME = (  # for messages: what a number column's value may be
    f"{UNIX_TIME}, or a compact local date YYYYMMDD, YYYYMMDDhhmm or YYYYMMDDhhmmss between {UNIX_FROM.year} "
    f"and {UNIX_UNTIL.year}"
)
LOCAL_MARGIN = dt.timedelta(hours=3)  # naive local times: DST moves them by an hour or two
COMPACT_DIGITS = (8, 12, 14)  # YYYYMMDD, YYYYMMDDhhmm, YYYYMMDDhhmmss


def _compact(local: dt.datetime, digits: int) -> int:
    """A naive local time as a compact number of `digits` digits, cut (not rounded) to its last field."""
    return int(f"{local.year:04d}{local:%m%d%H%M%S}"[:digits])


def compact_spans(start: dt.datetime, end: dt.datetime) -> list[tuple[int, int]]:
    """[lo, hi) numeric ranges, one per compact form, that hold every compact number of the naive local times in
    [start, end] (a little more: callers check each row's instant exactly)."""
    return [(_compact(start, d), _compact(end, d) + 1) for d in COMPACT_DIGITS]


_COMPACT_PLAUSIBLE = compact_spans(UNIX_FROM.replace(tzinfo=None), UNIX_UNTIL.replace(tzinfo=None))


def window_number_spans(start: dt.datetime, end: dt.datetime, zone: dt.tzinfo) -> list[tuple[int, int]]:
    """Numeric ranges that hold every number (Unix time or compact local date in `zone`) of the instants in
    [start, end): the Unix spans, and the compact spans of the local times LOCAL_MARGIN around them."""
    lo = (start.astimezone(zone) - LOCAL_MARGIN).replace(tzinfo=None)
    hi = (end.astimezone(zone) + LOCAL_MARGIN).replace(tzinfo=None)
    return unix_spans(start, end) + compact_spans(lo, hi)


def in_number_spans(col: sa.ColumnElement, start: dt.datetime, end: dt.datetime, zone: dt.tzinfo):
    """SQL: `col` is a number that may be an instant of [start, end) (`window_number_spans`)."""
    return in_spans(col, window_number_spans(start, end, zone))


def compact_number(value: Any) -> dt.datetime | None:
    """A number that reads as a compact date (YYYYMMDD, YYYYMMDDhhmm or YYYYMMDDhhmmss, 1980 to 2200, every
    field within its range) as a naive datetime; None for any other number (a fraction included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    elif isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    for (lo, hi), digits in zip(_COMPACT_PLAUSIBLE, COMPACT_DIGITS, strict=True):
        if lo <= value < hi:
            d = str(value)
            fields = [int(d[i : i + 2]) for i in range(8, digits, 2)]
            try:
                return dt.datetime(int(d[:4]), int(d[4:6]), int(d[6:8]), *fields)
            except ValueError:
                return None  # a month, day, hour, minute or second out of its range
    return None


def from_unix(value: int | float | Decimal) -> dt.datetime:
    """A Unix time in the unit its magnitude tells (the module's docstring). ValueError for any other number."""
    if (isinstance(value, float) and not math.isfinite(value)) or (
        isinstance(value, Decimal) and not value.is_finite()
    ):
        raise ValueError("not a finite number")
    for (lo, hi), per_second in zip(_PLAUSIBLE, UNIX_UNITS, strict=True):
        if lo <= value < hi:
            if isinstance(value, int):
                micros = value * 10**6 // per_second
            elif isinstance(value, float):  # a binary fraction: the nearest microsecond (.1234559999... is .123456)
                micros = round(Decimal(value) * 10**6 / per_second)
            else:  # a decimal is exact: cut to the microsecond, as integers are
                micros = math.floor(Decimal(value) * 10**6 / per_second)
            return UNIX_EPOCH + dt.timedelta(microseconds=int(micros))
    raise ValueError(f"a number that is not {UNIX_TIME}")


_UNIX_TEXT = re.compile(r"\s*([0-9]{1,20}(?:\.[0-9]{1,9})?)\s*", re.ASCII)


def unix_text(text: str) -> dt.datetime | None:
    """A Unix time written as digits (as CSV imports into text columns and JSON APIs leave it: "1796004000",
    "1796004000123", "1796004000.25"): its instant, by magnitude as for numbers; None for any other text,
    digits of no plausible Unix time included. Those are read as text (a compact date such as 20261130 or
    20261130050000 lies outside every unit's span, so the two readings never compete)."""
    m = _UNIX_TEXT.fullmatch(text)
    if m is None:
        return None
    try:
        return from_unix(Decimal(m[1]) if "." in m[1] else int(m[1]))
    except ValueError:
        return None


def text_reading(text: str, order: str | None = None) -> str:
    """`text_time.reading` for a text timestamp column's value, Unix times written as digits included."""
    return "read" if unix_text(text) is not None else reading(text, order)


def to_instant(value: Any, zone: dt.tzinfo, order: str | None = None) -> dt.datetime | None:
    """A source timestamp as an aware UTC datetime; naive values are in `zone`, numbers (and digits in text) are
    Unix times (UTC) or compact local dates (in `zone`), other text is ISO-8601 or another shape of
    inference.store.text_time (`order`: its date order, dmy or mdy). ValueError if unreadable."""
    if value is None:
        return None
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        try:
            return from_unix(value)
        except ValueError:
            value = compact_number(value)
            if value is None:
                raise ValueError(f"a number that is not {NUMBER_TIME}") from None
    if isinstance(value, str):
        unix = unix_text(value)
        if unix is not None:
            return unix
        value = parse_text_time(value, order)
    elif isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    elif not isinstance(value, dt.datetime):
        raise ValueError(f"a {type(value).__name__}, not a timestamp")
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(UTC)


_UTC_NAMES = {"utc", "etc/utc", "gmt", "etc/gmt", "universal", "etc/universal", "zulu", "etc/zulu", "uct", "etc/uct"}


def is_utc(name: str) -> bool:
    if name.strip().lower() in _UTC_NAMES | {"gmt0", "etc/gmt0", "etc/gmt+0", "etc/gmt-0", "greenwich"}:
        return True
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return False
    probes = [dt.datetime(2026, m, 15, 12) for m in (1, 4, 7, 10)]
    return all(zone.utcoffset(p) == dt.timedelta(0) for p in probes)
