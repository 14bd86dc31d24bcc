"""Reads the source tickets table, whatever its name, column names, key type and timestamp representation.

Keys. Our tables store a ticket ID as text, its *key*, of at most MAX_ID_BYTES bytes (UTF-8):
- PostgreSQL: the key is the database's own text form of the value (`CAST(id AS text)`: 12, a UUID, 'A-1');
  it is looked up again with `id = ANY(CAST(:keys AS <the column's type>[]))`, which uses the index.
- SQLite: a column holds values of any storage class whatever its declared type (an untyped column, a view
  column such as `id + 0 AS ticket_id`, text in an INTEGER column). The key of an integer is its digits, of a
  real its shortest form (12.0 is 12), of text the text itself, of a blob `X'<hex>'`. A key is looked up with
  every value it can stand for (`id IN ('12', 12)`) and the rows that come back are kept by key, so every
  shape is found again. Values with the same key (the integer 12 and the text '12') are one ticket.
- A row whose ID is NULL, or whose key is longer than MAX_ID_BYTES or not valid UTF-8, cannot be stored: it
  gets a surrogate key (`!unsupported-id:...`) and plan records that ticket failed (`unsupported_id`).

Duplicates. Several rows with one key (a view over a join, a replica, an import): the newest version wins,
ties broken by the content hash, wherever the source is read (plan, infer, load), so all agree.

Timestamps. The window selects by instant: SQL narrows the rows with a margin (by instant for `timestamp with
time zone`, by local time for `timestamp without time zone`, by text for ISO-8601 text, as SQLite stores
them), then each row's created and updated instants are checked exactly in Python. Naive values are in
TICKETS_SOURCE_TIMEZONE (default UTC; an ambiguous local time at a DST change is its first occurrence).
Shapes that cannot be read by instant are refused by `check` before anything is written, naming the column
and the fix: a column of another type, text that is not ISO-8601, numbers, and on PostgreSQL a `timestamp
without time zone` column while the database's own time zone is not UTC and TICKETS_SOURCE_TIMEZONE is unset.

Memory. Rows are fetched a few at a time (server-side cursors on PostgreSQL), about TEXT_BUDGET characters
of ticket text per fetch whatever the size of one ticket, and each row's text is reduced at once to what the
caller needs (a hash, the model input). Only `by_ids` returns whole texts (a page of them).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import math
import re
import zoneinfo
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from inference.config import SourceColumns
from inference.errors import ConfigError
from inference.records import SourceTicket, SourceVersion, TicketInput
from inference.store.db import in_pages
from inference.textprep import content_hash, has_text
from inference.window import UTC, Window

log = logging.getLogger("inference")

MAX_ID_BYTES = 512  # the width of ticket_id in our tables (revision 0005)
UNSUPPORTED_PREFIX = "!unsupported-id:"
TEXT_BUDGET = 2_000_000  # characters of ticket text per fetch (about 2 MB: ASCII text)
FIRST_FETCH, MAX_FETCH = 2, 1000
NO_TIME = dt.datetime(1970, 1, 1, tzinfo=UTC)  # version time of a row with neither timestamp
TEXT_MARGIN = dt.timedelta(hours=15)  # ISO text: UTC offsets and zones are within +-14 h of the instant
LOCAL_MARGIN = dt.timedelta(hours=3)  # naive local times: DST moves them by an hour or two


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One source row as plan reads it: no text, only what planning needs."""

    ticket_id: str  # the key, or a surrogate when id_problem is set
    id_problem: str | None  # why the ID cannot be a key: "null", "too long", "not UTF-8"
    version_at: dt.datetime
    content_hash: str
    empty: bool  # nothing visible to embed (the input policy)
    chars: int  # characters of subject and body (token estimate)


# --- keys -------------------------------------------------------------------------------------------------------

_INT_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
_BLOB_TEXT = re.compile(r"X'((?:[0-9A-F]{2})*)'")


def sqlite_key(value: Any) -> str | None:
    """The key of a value SQLite returned (None for NULL and values no key can stand for)."""
    if value is None or isinstance(value, bool):
        return None if value is None else str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**63:
            return str(int(value))
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex().upper() + "'"
    return str(value)


def sqlite_values(key: str) -> list[Any]:
    """Every SQLite value whose key is `key` (the text, and the number or blob it may also be)."""
    values: list[Any] = [key]
    if _INT_TEXT.fullmatch(key) and -(2**63) <= int(key) < 2**63:
        values.append(int(key))
    else:
        try:
            number = float(key)
        except ValueError:
            number = None
        if number is not None and math.isfinite(number) and repr(number) == key:
            values.append(number)
    blob = _BLOB_TEXT.fullmatch(key)
    if blob:
        values.append(bytes.fromhex(blob.group(1)))
    return values


def id_problem(key: str | None) -> str | None:
    """Why a key cannot be stored in our tables, or None."""
    if key is None:
        return "null"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "not UTF-8"
    if size > MAX_ID_BYTES:
        return f"longer than {MAX_ID_BYTES} bytes"
    if "\x00" in key:
        return "contains NUL"
    return None


def surrogate_key(problem: str, raw: Any, digest: str) -> str:
    """A stable stand-in key for a row whose ID cannot be a key (never a real ID's key: see UNSUPPORTED_PREFIX)."""
    seed = digest if raw is None else repr(raw)
    kind = problem.split()[0].lower().replace("-", "")
    return f"{UNSUPPORTED_PREFIX}{kind}:{hashlib.sha256(seed.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


# --- timestamps -------------------------------------------------------------------------------------------------

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


def _sort_key(value: Any) -> tuple:
    """SQLite's order across storage classes: numbers, then text, then blobs (one type per column elsewhere)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value, "")
    if isinstance(value, str):
        return (1, 0, value)
    if isinstance(value, bytes | bytearray | memoryview):
        return (2, 0, bytes(value).hex())
    return (1, 0, str(value))


class _PgType(sa.types.UserDefinedType):
    """A PostgreSQL type by name, for CAST(:keys AS <name>[])."""

    cache_ok = True

    def __init__(self, name: str):
        self.name = name

    def get_col_spec(self, **_kw) -> str:
        return self.name


_PG_COLUMNS = sa.text(
    "SELECT a.attname, format_type(a.atttypid, NULL), b.typname, b.typcategory "
    "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
    "JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END "
    "WHERE a.attrelid = CAST(:rel AS regclass) AND a.attnum > 0 AND NOT a.attisdropped"
)
_STAMP_KINDS = {"timestamptz": "tz", "timestamp": "naive", "date": "date"}
_UTC_NAMES = {"utc", "etc/utc", "gmt", "etc/gmt", "universal", "etc/universal", "zulu", "etc/zulu", "uct", "etc/uct"}


def _is_utc(name: str) -> bool:
    if name.strip().lower() in _UTC_NAMES | {"gmt0", "etc/gmt0", "etc/gmt+0", "etc/gmt-0", "greenwich"}:
        return True
    try:
        zone = zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return False
    probes = [dt.datetime(2026, m, 15, 12) for m in (1, 4, 7, 10)]
    return all(zone.utcoffset(p) == dt.timedelta(0) for p in probes)


class Source:
    def __init__(self, engine: sa.Engine, cols: SourceColumns):
        self.cols = cols
        self.engine = engine
        self.dialect = engine.dialect.name
        self.zone: dt.tzinfo = zoneinfo.ZoneInfo(cols.timezone) if cols.timezone else UTC
        self._pg = self.dialect == "postgresql"
        self._types = self._reflect(engine, cols)
        self.table = sa.table(
            cols.table,
            *[sa.column(name) for name in dict.fromkeys(self._names)],
            schema=cols.schema,
        )
        c = self.table.c
        self._id = c[cols.ticket_id]
        self._key_col = sa.cast(self._id, sa.Text) if self._pg else self._id
        self._stamps = {name: self._stamp_kind(name) for name in (cols.created_at, cols.updated_at)}

    @property
    def _names(self) -> list[str]:
        c = self.cols
        return [c.ticket_id, c.subject, c.body, c.created_at, c.updated_at]

    @property
    def where(self) -> str:
        return f"{self.cols.schema}.{self.cols.table}" if self.cols.schema else self.cols.table

    def _reflect(self, engine: sa.Engine, cols: SourceColumns) -> dict[str, tuple[str, str, str]]:
        """Which columns exist; on PostgreSQL each one's (declared type, base type name, type category)."""
        try:
            found = {c["name"]: c for c in sa.inspect(engine).get_columns(cols.table, schema=cols.schema)}
        except sa.exc.NoSuchTableError:
            raise ConfigError(
                f"source table {self.where} does not exist: set TICKETS_SOURCE_TABLE (and TICKETS_SOURCE_SCHEMA), "
                "or create the demo backlog with `python -m inference seed`"
            ) from None
        missing = [name for name in self._names if name not in found]
        if missing:
            raise ConfigError(
                f"source table {self.where} has no column(s) {', '.join(missing)}: set the TICKETS_COL_* variables"
            )
        if not self._pg:
            return {}
        rel = f'"{cols.schema}"."{cols.table}"' if cols.schema else f'"{cols.table}"'
        with engine.connect() as conn:
            rows = conn.execute(_PG_COLUMNS, {"rel": rel}).all()
        return {name: (declared, base, category) for name, declared, base, category in rows}

    def _stamp_kind(self, name: str) -> str:
        """How a timestamp column's values are compared: tz, naive, date, text (or unsupported: a type name)."""
        if not self._pg:
            return "text"  # SQLite keeps timestamps as text (SQLAlchemy writes ISO-8601); `check` verifies it
        declared, base, category = self._types[name]
        if base in _STAMP_KINDS:
            return _STAMP_KINDS[base]
        return "text" if category == "S" else f"unsupported:{declared}"

    # --- the start-of-run check ---------------------------------------------------------------------------------

    def check(self, conn: sa.Connection | None = None) -> None:
        """Refuses, before anything is written, a source that cannot be read by instant and by key (ConfigError
        naming the column and the fix). Scans text timestamp columns once (SQLite: both)."""
        if conn is None:
            with self.engine.connect() as own:
                return self.check(own)
        for name, env_name in (
            (self.cols.created_at, "TICKETS_COL_CREATED_AT"),
            (self.cols.updated_at, "TICKETS_COL_UPDATED_AT"),
        ):
            kind = self._stamps[name]
            if kind.startswith("unsupported:"):
                fix = (
                    f"to_timestamp({name})"
                    if "int" in kind or "numeric" in kind or "double" in kind
                    else f"CAST({name} AS timestamptz)"
                )
                raise ConfigError(
                    f"{env_name}: column {name} of {self.where} is of type {kind.split(':', 1)[1]}, not a timestamp: "
                    f"point {env_name} at a timestamp column, or at a view column that converts it ({fix} AS {name})"
                )
            if kind == "naive" and self.cols.timezone is None:
                zone = self._database_zone
                if not _is_utc(zone):
                    raise ConfigError(
                        f"{env_name}: column {name} of {self.where} is `timestamp without time zone` and the "
                        f"database's time zone is {zone}, so its values may be local times: set "
                        f"TICKETS_SOURCE_TIMEZONE to the zone they are written in ({zone}, or UTC if they are UTC), "
                        "or make the column `timestamp with time zone`"
                    )
            if kind == "text":
                bad = self._unreadable_text_stamps(conn, name)
                if bad:
                    raise ConfigError(
                        f"{env_name}: {bad} value(s) of column {name} of {self.where} are not ISO-8601 timestamps "
                        "(YYYY-MM-DD[ HH:MM[:SS[.ffffff]]][+HH:MM|Z], as text), so windows cannot select them by "
                        f"instant: fix those rows, or point {env_name} at a view column that converts them "
                        f"(SQLite: datetime({name}, 'unixepoch') for Unix times)"
                    )
        self._check_keys(conn)

    @functools.cached_property
    def _database_zone(self) -> str:
        """The time zone a session of this database gets by default (ours sets UTC for itself)."""
        url = self.engine.url
        other = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args={"connect_timeout": 10})
        try:
            with other.connect() as conn:
                return str(conn.exec_driver_sql("SHOW TimeZone").scalar())
        finally:
            other.dispose()

    def _unreadable_text_stamps(self, conn: sa.Connection, name: str) -> int:
        col = self.table.c[name]
        if self._pg:
            pattern = r"^\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d*)?)?)?\s*([Zz]|[+-]\d{2}(:?\d{2})?)?\s*$"
            bad = sa.and_(col.is_not(None), sa.not_(sa.cast(col, sa.Text).regexp_match(pattern)))
        else:
            date = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
            shaped = sa.or_(col.op("GLOB")(date), col.op("GLOB")(date + "[ T][0-9][0-9]:[0-9][0-9]*"))
            readable = sa.and_(sa.func.typeof(col) == "text", shaped, sa.func.julianday(col).is_not(None))
            bad = sa.and_(col.is_not(None), sa.not_(readable))
        return conn.scalar(sa.select(sa.func.count()).select_from(self.table).where(bad)) or 0

    def _check_keys(self, conn: sa.Connection) -> None:
        """The first IDs in the source's order must be found again by their keys (or the lookups are broken)."""
        stmt = (
            sa.select(self._key_col if self._pg else self._id).where(self._id.is_not(None)).order_by(self._id).limit(3)
        )
        raw = list(conn.scalars(stmt))
        keys = [k for k in (self._key_of(v) for v in raw) if id_problem(k) is None]
        found = self.existing(conn, keys)
        if set(keys) - found:
            raise ConfigError(
                f"TICKETS_COL_ID: ticket IDs of column {self.cols.ticket_id} of {self.where} cannot be looked up by "
                "their own values: point TICKETS_COL_ID at a column of integers, text or UUIDs"
            )

    # --- reading ------------------------------------------------------------------------------------------------

    def _key_of(self, value: Any) -> str | None:
        return (None if value is None else str(value)) if self._pg else sqlite_key(value)

    def _select(self) -> sa.Select:
        """The columns every read takes, unordered: sorting rows that carry text would make the database
        (SQLite in this process) hold them all; the order is read separately, IDs only (`order`)."""
        c, cols = self.table.c, self.cols
        return sa.select(self._key_col, c[cols.subject], c[cols.body], c[cols.created_at], c[cols.updated_at])

    def _version(self, row) -> dt.datetime:
        """updated_at, or created_at where it is NULL, as an instant."""
        created = self._instant(row[3], self.cols.created_at)
        updated = self._instant(row[4], self.cols.updated_at)
        return updated or created or NO_TIME

    def _instant(self, value: Any, column: str) -> dt.datetime | None:
        try:
            return to_instant(value, self.zone)
        except (ValueError, OverflowError):
            env_name = "TICKETS_COL_CREATED_AT" if column == self.cols.created_at else "TICKETS_COL_UPDATED_AT"
            raise ConfigError(
                f"{env_name}: a value of column {column} of {self.where} is not a readable timestamp "
                "(ISO-8601 YYYY-MM-DD[ HH:MM[:SS[.ffffff]]][+HH:MM|Z]): fix it, or point "
                f"{env_name} at a view column that converts it"
            ) from None

    def _window_filter(self, window: Window) -> sa.ColumnElement[bool]:
        parts = []
        for name in (self.cols.created_at, self.cols.updated_at):
            col, kind = self.table.c[name], self._stamps[name]
            if kind == "tz":
                lo, hi = window.start, window.end
            elif kind in ("naive", "date"):
                lo = (window.start.astimezone(self.zone) - LOCAL_MARGIN).replace(tzinfo=None)
                hi = (window.end.astimezone(self.zone) + LOCAL_MARGIN).replace(tzinfo=None)
                if kind == "date":
                    lo, hi = lo.date(), hi.date() + dt.timedelta(days=1)
            else:  # ISO text: '<date> <hour>' <= value < '<date>T<hour>' holds every instant +-14 h around the window
                lo = (window.start - TEXT_MARGIN).strftime("%Y-%m-%d %H")
                hi = (window.end + TEXT_MARGIN).strftime("%Y-%m-%dT%H")
                col = sa.collate(col, "C" if self._pg else "BINARY")
            parts.append(sa.and_(col >= lo, col < hi))
        return sa.or_(*parts)

    def _stream(self, conn: sa.Connection, stmt, params: dict | None = None) -> Iterator[sa.Row]:
        """Rows a few at a time: about TEXT_BUDGET characters of subject and body per fetch."""
        result = conn.execute(stmt, params or {}, execution_options={"stream_results": True})
        size = FIRST_FETCH
        try:
            while rows := result.fetchmany(size):
                chars = sum(len(r[1] or "") + len(r[2] or "") for r in rows) if len(rows[0]) > 2 else 0
                yield from rows
                size = max(1, min(MAX_FETCH, TEXT_BUDGET // max(1, chars // len(rows))))
                rows = None
        finally:
            result.close()

    def _window_rows(self, conn: sa.Connection, window: Window) -> Iterator[sa.Row]:
        """Rows created or updated in [start, end) by instant (duplicates too), unordered."""
        for row in self._stream(conn, self._select().where(self._window_filter(window))):
            created = self._instant(row[3], self.cols.created_at)
            updated = self._instant(row[4], self.cols.updated_at)
            if any(t is not None and window.start <= t < window.end for t in (created, updated)):
                yield row

    def _plan_row(self, row) -> SourceRow:
        subject, body = row[1], row[2]
        digest = content_hash(subject, body)
        key = self._key_of(row[0])
        problem = id_problem(key)
        if problem is not None:
            key = surrogate_key(problem, row[0], digest)
        chars = len(subject or "") + len(body or "")
        return SourceRow(key, problem, self._version(row), digest, not has_text(subject, body), chars)

    def order(
        self, conn: sa.Connection, window: Window | None = None, keys: Iterable[str] | None = None
    ) -> dict[str, int]:
        """key -> its position in the source's own ID order (numbers numerically, text by the column's
        collation), for the window's rows or for these keys: only IDs are sorted."""
        stmt = sa.select(self._key_col).order_by(self._id)
        if window is not None:
            rows: Iterable = self._stream(conn, stmt.where(self._window_filter(window)))
        else:
            found = self._rows_for_keys(conn, keys or (), sa.select(self._key_col, self._id), text=False)
            rows = sorted(found, key=lambda r: _sort_key(r[1]))
        out: dict[str, int] = {}
        for row in rows:
            out.setdefault(self._key_of(row[0]), len(out))
        return out

    def scan_window(self, conn: sa.Connection, window: Window) -> Iterator[SourceRow]:
        """Plan's read of the window: every row (duplicates included), unordered, no text."""
        for row in self._window_rows(conn, window):
            yield self._plan_row(row)

    def scan_ids(self, conn: sa.Connection, keys: Iterable[str]) -> Iterator[SourceRow]:
        """Plan's read of named tickets (duplicates included), no text."""
        for row in self._rows_for_keys(conn, keys, self._select()):
            yield self._plan_row(row)

    def in_window(self, conn: sa.Connection, window: Window) -> Iterator[SourceTicket]:
        """Tickets created or updated in [start, end) with their whole text, one per row (duplicates too)."""
        for row in self._window_rows(conn, window):
            key = self._key_of(row[0])
            if id_problem(key) is None:
                yield SourceTicket(key, row[1], row[2], self._version(row))

    # --- lookups by key -----------------------------------------------------------------------------------------

    def _lookup(self, keys: list[str]) -> tuple[sa.ColumnElement[bool], dict]:
        if self._pg:
            declared, base, _ = self._types[self.cols.ticket_id]
            name = "bpchar" if base == "bpchar" else declared
            array = sa.cast(sa.bindparam("keys", type_=postgresql.ARRAY(sa.Text)), postgresql.ARRAY(_PgType(name)))
            return self._id == sa.any_(array), {"keys": keys}
        values = [v for k in keys for v in sqlite_values(k)]
        return self._id.in_(sa.bindparam("ids", expanding=True)), {"ids": values}

    def _rows_for_keys(
        self, conn: sa.Connection, keys: Iterable[str], stmt: sa.Select, text: bool = True
    ) -> Iterator[sa.Row]:
        """The rows of these keys (all of them: duplicates too), a page of keys per statement; rows carrying
        `text` are streamed a few at a time, ID-only rows fetched at once."""
        for page in in_pages(k for k in keys if id_problem(k) is None):
            wanted = set(page)
            yield from (r for r in self._page(conn, page, stmt, text) if self._key_of(r[0]) in wanted)

    def _fetch(self, conn: sa.Connection, stmt, params: dict, text: bool) -> Iterator[sa.Row]:
        return self._stream(conn, stmt, params) if text else iter(conn.execute(stmt, params).all())

    def _page(self, conn: sa.Connection, page: list[str], stmt: sa.Select, text: bool = True) -> Iterator[sa.Row]:
        where, params = self._lookup(page)
        if not self._pg:
            yield from self._fetch(conn, stmt.where(where), params, text)
            return
        try:  # a key the column's type cannot hold (a named ID like 'abc' for an integer column) fails the cast
            with conn.begin_nested():
                rows = self._fetch(conn, stmt.where(where), params, text)
                first = next(rows, None)  # the cast fails here, before any row
                if first is not None:
                    yield first
                    yield from rows
            return
        except sa.exc.DataError:
            if len(page) == 1:
                return
        for key in page:
            yield from self._page(conn, [key], stmt, text)

    def _winners(self, conn: sa.Connection, keys: Iterable[str], make: Callable[[sa.Row, str], Any]) -> dict[str, Any]:
        """key -> make(row, digest) of the key's newest row (then the highest content hash: deterministic)."""
        best: dict[str, tuple[dt.datetime, str, Any]] = {}
        for row in self._rows_for_keys(conn, keys, self._select()):
            key, digest, version = self._key_of(row[0]), content_hash(row[1], row[2]), self._version(row)
            seen = best.get(key)
            if seen is None or (version, digest) > seen[:2]:
                best[key] = (version, digest, make(row, digest))
        return {key: value for key, (_, _, value) in best.items()}

    def by_ids(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, SourceTicket]:
        """Current rows (whole text) for these keys; keys that no longer exist are absent from the answer."""
        return self._winners(
            conn, ticket_ids, lambda row, _d: SourceTicket(self._key_of(row[0]), row[1], row[2], self._version(row))
        )

    def model_inputs(
        self, conn: sa.Connection, ticket_ids: Iterable[str], text_of: Callable[[str | None, str | None], tuple]
    ) -> dict[str, TicketInput]:
        """Current model inputs and content hashes for these keys: `text_of(subject, body)` (the predictor's
        input policy: `Predictor.input_text`) is applied to each row as it is read; whole texts are not kept."""

        def make(row, digest: str) -> TicketInput:
            text, cut = text_of(row[1], row[2])
            return TicketInput(self._key_of(row[0]), self._version(row), digest, text, cut)

        return self._winners(conn, ticket_ids, make)

    def versions(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, SourceVersion]:
        """What each ticket is now (content hash of its current text, version time), no text kept."""
        return self._winners(conn, ticket_ids, lambda row, digest: SourceVersion(digest, self._version(row)))

    def existing(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> set[str]:
        """Which of these keys the source still holds (reads IDs only)."""
        stmt = sa.select(self._key_col)
        return {self._key_of(r[0]) for r in self._rows_for_keys(conn, ticket_ids, stmt, text=False)}
