"""Source timestamps as instants: text (ISO-8601 as SQLite and other applications write it, and other shapes:
inference.store.text_time), naive values in a configured zone, Unix times (numbers), and whether a database's
zone name means UTC.

Unix times are numbers of seconds, milliseconds, microseconds or nanoseconds since 1970-01-01 UTC, told apart
by magnitude: each unit's plausible span (`UNIX_FROM` to `UNIX_UNTIL`, 1980 to 2200) lies orders of magnitude
away from every other unit's, so a value in one of the spans has one reading; any other number (a version
counter, 0, a negative) is no timestamp and is refused at start (`unix_spans`)."""

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


def in_unix_spans(col: sa.ColumnElement, start: dt.datetime, end: dt.datetime) -> sa.ColumnElement[bool]:
    """SQL: `col` is a number within `unix_spans(start, end)` (PostgreSQL: a number column; SQLite: numbers sort
    before any text, so text values never match)."""
    return sa.or_(*[sa.and_(col >= lo, col < hi) for lo, hi in unix_spans(start, end)])


_PLAUSIBLE = unix_spans(UNIX_FROM, UNIX_UNTIL)
UNIX_TIME = (  # for messages
    f"a Unix time between {UNIX_FROM.year} and {UNIX_UNTIL.year} (in seconds, milliseconds, microseconds or "
    "nanoseconds, told apart by magnitude)"
)


def from_unix(value: int | float | Decimal) -> dt.datetime:
    """A Unix time in the unit its magnitude tells (the module's docstring). ValueError for any other number."""
    if isinstance(value, float) and not math.isfinite(value):
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
    Unix times (UTC), other text is ISO-8601 or another shape of inference.store.text_time (`order`: its date
    order, dmy or mdy). ValueError if unreadable."""
    if value is None:
        return None
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return from_unix(value)
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
