"""Source timestamps as instants: ISO-8601 text as SQLite and other applications write it, naive values in a
configured zone, and whether a database's zone name means UTC."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from typing import Any

from inference.window import UTC

_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d*))?)?)?"
    r"\s*(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?"
)


def parse_iso(text: str) -> dt.datetime:
    """ISO-8601 text as SQLite and most applications write it; naive unless it carries an offset or Z."""
    m = _ISO.fullmatch(text.strip())
    if not m:
        raise ValueError("not an ISO-8601 timestamp")
    year, month, day, hour, minute, second, frac, zulu, sign, oh, om = m.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    tz = None
    if zulu:
        tz = UTC
    elif sign:
        offset = dt.timedelta(hours=int(oh), minutes=int(om or 0))
        tz = dt.timezone(-offset if sign == "-" else offset)
    return dt.datetime(
        int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micro, tzinfo=tz
    )


def to_instant(value: Any, zone: dt.tzinfo) -> dt.datetime | None:
    """A source timestamp as an aware UTC datetime; naive values are in `zone`. ValueError if unreadable."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_iso(value)
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
