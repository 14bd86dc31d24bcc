"""The start-of-run check of a source: refuses, before anything is written, timestamp columns that cannot be
read by instant and IDs that cannot be looked up by their keys, with a ConfigError naming the column and the fix.
Scans text and number timestamp columns once (SQLite: both); a text column's values other than plain ISO-8601
are read in Python (a second scan, of those values only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from inference.config import shown_name
from inference.errors import ConfigError
from inference.store.source_keys import id_problem
from inference.store.source_time import (
    NUMBER_TIME,
    UNIX_FROM,
    UNIX_UNTIL,
    compact_number,
    in_unix_spans,
    is_utc,
    text_reading,
    to_instant,
)
from inference.store.text_time import TEXT_SHAPES
from inference.window import UTC

if TYPE_CHECKING:
    from inference.store.source import Source


def check(source: Source, conn: sa.Connection) -> None:
    """Refuses, before anything is written, a source that cannot be read by instant and by key (ConfigError
    naming the column and the fix). Scans text timestamp columns once (SQLite: both)."""
    check_text_columns(source)
    for name, env_name in (
        (source.cols.created_at, "TICKETS_COL_CREATED_AT"),
        (source.cols.updated_at, "TICKETS_COL_UPDATED_AT"),
    ):
        kind, shown, q = source.stamps[name], shown_name(name), source.sql_name(name)
        if kind.startswith("unsupported:"):
            raise ConfigError(
                f"{env_name}: column {shown} of {source.where} is of type {kind.split(':', 1)[1]}, not a timestamp: "
                f"point {env_name} at a timestamp column, or at a view column that converts it "
                f"(CAST({q} AS timestamptz) AS {q})"
            )
        if kind == "naive" and source.cols.timezone is None:
            zone = database_zone(source.engine)
            if not is_utc(zone):
                raise ConfigError(
                    f"{env_name}: column {shown} of {source.where} is `timestamp without time zone` and the "
                    f"database's time zone is {zone}, so its values may be local times: set "
                    f"TICKETS_SOURCE_TIMEZONE to the zone they are written in ({zone}, or UTC if they are UTC), "
                    "or make the column `timestamp with time zone`"
                )
        if kind == "unix":
            bad = unreadable_number_stamps(source, conn, name)
            if bad:
                raise ConfigError(
                    f"{env_name}: {bad} value(s) of number column {shown} of {source.where} are not {NUMBER_TIME}, "
                    f"so windows cannot select them by instant: fix those rows, or point {env_name} at a timestamp "
                    "column or a view column that converts them"
                )
        if kind == "text" and source.not_iso_count(conn, name):
            check_text_stamps(source, conn, name, env_name)
    check_keys(source, conn)


TEXT_TYPES = {"xml"}  # besides the string category (text, varchar, char, citext and domains over them)


def check_text_columns(source: Source) -> None:
    """PostgreSQL: subject and body must be text; another type (json, bytea, an array, a number) is refused
    with the fix, a view column that says which text it holds. SQLite reads any value as text (`_select`)."""
    if not source.is_pg:
        return
    for name, env_name in ((source.cols.subject, "TICKETS_COL_SUBJECT"), (source.cols.body, "TICKETS_COL_BODY")):
        if name is None:  # no subject column
            continue
        declared, base, category = source._types[name]
        if category != "S" and base not in TEXT_TYPES:
            q = source.sql_name(name)
            raise ConfigError(
                f"{env_name}: column {shown_name(name)} of {source.where} is of type {declared}, not text: point "
                f"{env_name} at a view column that holds its text (for example {q}->>'text' AS {q} for JSON, "
                f"convert_from({q}, 'UTF8') AS {q} for bytea, CAST({q} AS text) AS {q} otherwise)"
            )


def database_zone(engine: sa.Engine) -> str:
    """The time zone a session of this database gets by default (ours sets UTC for itself)."""
    url = engine.url
    other = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 10})
    try:
        with other.connect() as conn:
            return str(conn.exec_driver_sql("SHOW TimeZone").scalar())
    finally:
        other.dispose()


def unreadable_number_stamps(source: Source, conn: sa.Connection, name: str) -> int:
    """PostgreSQL, a number column: values that are neither a plausible Unix time nor a compact local date
    (NaN and infinities included). One scan: the values outside the Unix spans come back (none, for a column of
    Unix times) and are read here, as a compact date's fields must each be within their range."""
    col = source.table.c[name]
    other = sa.select(col).where(col.is_not(None), sa.not_(in_unix_spans(col, UNIX_FROM, UNIX_UNTIL)))
    bad = 0
    result = conn.execute(other, execution_options={"stream_results": True})
    try:
        while values := result.scalars().fetchmany(5000):
            bad += sum(compact_number(v) is None for v in values)
    finally:
        result.close()
    return bad


# ISO-8601 as a text range narrows it; months, days, hours and minutes within their ranges (a value outside
# them, "2026-13-45", sorts outside every window and would be passed over without a word)
_ISO_SHAPE = (
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])([ T]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?)?"
    r"\s*([Zz]|[+-]\d{2}(:?\d{2})?)?\s*$"
)


def _not_iso(source: Source, col: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """SQL: a value of a text timestamp column that a text range cannot select by instant: anything but
    ISO-8601 as `_window_filter` narrows it (from its first character). SQLite: but numbers that are plausible
    Unix times (selected by their own ranges)."""
    if source.is_pg:
        return sa.and_(col.is_not(None), sa.not_(sa.cast(col, sa.Text).regexp_match(_ISO_SHAPE)))
    date = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
    shaped = sa.or_(col.op("GLOB")(date), col.op("GLOB")(date + "[ T][0-9][0-9]:[0-9][0-9]*"))
    text = sa.and_(sa.func.typeof(col) == "text", shaped, sa.func.julianday(col).is_not(None))
    number = sa.and_(sa.func.typeof(col).in_(["integer", "real"]), in_unix_spans(col, UNIX_FROM, UNIX_UNTIL))
    return sa.and_(col.is_not(None), sa.not_(sa.or_(text, number)))


def not_iso_stamps(source: Source, conn: sa.Connection, name: str) -> int:
    """How many values of a text timestamp column are `_not_iso` (a scan of the column)."""
    bad = _not_iso(source, source.table.c[name])
    return conn.scalar(sa.select(sa.func.count()).select_from(source.table).where(bad)) or 0


def check_text_stamps(source: Source, conn: sa.Connection, name: str, env_name: str) -> None:
    """A text column with values other than plain ISO-8601: each of those is read (inference.store.text_time), and the
    column is refused if any is unreadable, or if its numeric dates need a day-or-month order that is unset or
    that they contradict. Counts only in the messages, never values."""
    col = source.table.c[name]
    stmt = sa.select(sa.cast(col, sa.Text) if source.is_pg else col).where(_not_iso(source, col))
    order = source.cols.date_order
    counts: dict[str, int] = {}
    result = conn.execute(stmt, execution_options={"stream_results": True})
    try:
        while values := result.scalars().fetchmany(5000):
            for value in values:
                how = _reading(value, order)
                counts[how] = counts.get(how, 0) + 1
    finally:
        result.close()
    where = f"column {shown_name(name)} of {source.where}"
    if counts.get("unreadable"):
        numbers = "" if source.is_pg else f", or numbers, each {NUMBER_TIME}"
        orders = f" in the order TICKETS_SOURCE_DATE_ORDER={order}" if order else ""
        raise ConfigError(
            f"{env_name}: {counts['unreadable']} value(s) of {where} are not readable timestamps{orders} "
            f"({TEXT_SHAPES}{numbers}), so windows cannot select them by instant: fix those rows, or point "
            f"{env_name} at a view column that converts them"
        )
    dmy, mdy, either = counts.get("dmy", 0), counts.get("mdy", 0), counts.get("either", 0)
    if dmy and mdy:
        raise ConfigError(
            f"{env_name}: {where} holds dates that read only day-first ({dmy}) and dates that read only "
            f"month-first ({mdy}), so some of them are misread whatever the order: fix those rows, or point "
            f"{env_name} at a view column that converts them"
        )
    if either:
        fits = (
            " (the column's other values read dmy only)" if dmy else " (its other values read mdy only)" if mdy else ""
        )
        raise ConfigError(
            f"{env_name}: {either} value(s) of {where} are numeric dates such as 05/11/2026 that read day-first "
            f"or month-first: set TICKETS_SOURCE_DATE_ORDER to dmy or mdy{fits}"
        )


def _reading(value: object, order: str | None) -> str:
    if isinstance(value, str):
        return text_reading(value, order)
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # SQLite: a compact date, or no time
        try:
            to_instant(value, UTC)
            return "read"
        except (ValueError, OverflowError):
            return "unreadable"
    return "unreadable"  # SQLite: a blob


def check_keys(source: Source, conn: sa.Connection) -> None:
    """The first IDs in the source's order must be found again by their keys (or the lookups are broken)."""
    stmt = (
        sa.select(source.key_col if source.is_pg else source.id_col)
        .where(source.id_col.is_not(None))
        .order_by(source.id_col)
        .limit(3)
    )
    raw = list(conn.scalars(stmt))
    keys = [k for k in (source.key_of(v) for v in raw) if id_problem(k) is None]
    found = source.existing(conn, keys)
    if set(keys) - found:
        raise ConfigError(
            f"TICKETS_COL_ID: ticket IDs of column {shown_name(source.cols.ticket_id)} of {source.where} cannot be "
            "looked up by their own values: point TICKETS_COL_ID at a column of integers, text or UUIDs"
        )
