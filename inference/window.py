"""The nightly window: [D 02:00, D+1 02:00) UTC for logical date D. Pure functions of their arguments."""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

UTC = dt.UTC
CUTOFF = dt.time(2, 0)


class Window(NamedTuple):
    start: dt.datetime
    end: dt.datetime

    def __str__(self) -> str:
        return f"[{self.start.isoformat()}, {self.end.isoformat()})"


def as_utc(value: dt.datetime) -> dt.datetime:
    """Naive datetimes are taken as UTC (the source tables store UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def window_for_date(day: dt.date) -> Window:
    start = dt.datetime.combine(day, CUTOFF, tzinfo=UTC)
    return Window(start, start + dt.timedelta(days=1))


def last_complete_window(now: dt.datetime) -> Window:
    """The most recent window that has fully ended at `now`."""
    now = as_utc(now)
    end = dt.datetime.combine(now.date(), CUTOFF, tzinfo=UTC)
    if end > now:
        end -= dt.timedelta(days=1)
    return Window(end - dt.timedelta(days=1), end)


def make_window(start: dt.datetime, end: dt.datetime) -> Window:
    start, end = as_utc(start), as_utc(end)
    if end <= start:
        raise ValueError(f"window end {end.isoformat()} must be after its start {start.isoformat()}")
    return Window(start, end)


def parse_day(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected a date as YYYY-MM-DD, got {text!r}") from None
