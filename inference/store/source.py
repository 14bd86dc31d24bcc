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

Text. Subject and body are read as text: on SQLite every value whatever its storage class (`CAST(.. AS TEXT)`:
a blob's bytes, a number's digits); on PostgreSQL only string types and xml (`check` refuses others).

Duplicates. Several rows with one key (a view over a join, a replica, an import): the newest version wins,
ties broken by the content hash, wherever the source is read (plan, infer, load), so all agree.

Timestamps. The window selects by instant: SQL narrows the rows with a margin (by instant for `timestamp with time
zone`, by local time for `timestamp without time zone`, by text for ISO-8601 text, as SQLite stores them, by one
range per unit for Unix times and per form for compact dates), then each row's created and updated instants are
checked exactly in Python. A text column holding any value in another shape (RFC 2822, 30/11/2026, Nov 30, 2026:
see inference.store.text_time) is not narrowed at all: every row is read and checked (`not_iso_count`). Naive
values are in TICKETS_SOURCE_TIMEZONE (default UTC; an ambiguous local time at a DST change is its first
occurrence). Shapes that cannot be read by instant are refused by `check` before anything is written, naming the
column and the fix: a column of another type, text without exactly one reading, numbers that are no Unix time
nor compact date, and on PostgreSQL a `timestamp without time zone` column while the database's own time zone is
not UTC and TICKETS_SOURCE_TIMEZONE is unset.

Row versions. On a PostgreSQL table (plain or partitioned, its system columns readable), the model's read also
notes each ticket's row versions: the system columns tableoid, ctid and xmin of every row of its key. A row
version never changes: an UPDATE, a DELETE or an INSERT of that key changes the set. So when infer checks,
before writing, that a ticket is still the text it read, a ticket whose rows are still the very same row
versions is known unchanged without reading and hashing its text again (`versions(..., as_read=...)`); any
other ticket (moved by VACUUM FULL, updated, even to the same text) is read again in full. Views, foreign
tables, SQLite and roles without SELECT on tableoid, ctid and xmin are always read again in full.

Hashes in the database. On PostgreSQL, where subject and body are text or varchar (or domains over them) and
the database is UTF-8, the database computes each row's content hash (inference/store/source_sql.py: the very
bytes Python hashes) wherever the source is read by key (infer's model inputs, load's checks), and plan has it
also count the characters and tell whether the text is surely visible, so the text stays in the database.
Where the timestamps are also `timestamp with time zone`, the window is planned inside the database
altogether (`window_plan_rows`: one CREATE TABLE .. AS, which may scan with parallel workers), but for the rows
that need Python: an ID that cannot be a key, text with no ASCII letter or digit (the input policy decides
whether anything in it is visible), an infinite timestamp. Other shapes are read and hashed in Python.

Memory. Rows are fetched a few at a time (server-side cursors on PostgreSQL), about TEXT_BUDGET characters
of ticket text per fetch whatever the size of one ticket, and each row's text is reduced at once to what the
caller needs (a hash, the model input). Only `by_ids` returns whole texts (a page of them).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import zoneinfo
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from inference.config import SourceColumns, quoted_name, shown_name
from inference.errors import ConfigError
from inference.records import SourceTicket, SourceVersion, TicketInput
from inference.store import source_sql as sql
from inference.store.db import in_pages, page_size
from inference.store.source_check import check as check_source
from inference.store.source_check import not_iso_stamps
from inference.store.source_keys import (
    MAX_ID_BYTES,
    PgType,
    id_problem,
    sort_key,
    sqlite_key,
    sqlite_values,
    surrogate_key,
)
from inference.store.source_time import LOCAL_MARGIN, NUMBER_TIME, in_number_spans, in_unix_spans, to_instant
from inference.store.text_time import TEXT_SHAPES
from inference.textprep import content_hash, has_text
from inference.window import UTC, Window

log = logging.getLogger("inference")

TEXT_BUDGET = 2_000_000  # characters of ticket text per fetch (about 2 MB: ASCII text)
FIRST_FETCH, MAX_FETCH = 2, 1000
NO_TIME = dt.datetime(1970, 1, 1, tzinfo=UTC)  # version time of a row with neither timestamp
TEXT_MARGIN = dt.timedelta(hours=15)  # ISO text: UTC offsets and zones are within +-14 h of the instant


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One source row as plan reads it: no text, only what planning needs."""

    ticket_id: str  # the key, or a surrogate when id_problem is set
    id_problem: str | None  # why the ID cannot be a key: "null", "too long", "not UTF-8"
    version_at: dt.datetime
    content_hash: str
    empty: bool  # nothing visible to embed (the input policy)
    chars: int  # characters of subject and body (token estimate)


# The source relation, `CAST(concat_ws('.', quote_ident(:schema), quote_ident(:table)) AS regclass)`: found as
# the server finds `schema.table` (unqualified: along the search path). The names are bind parameters, quoted by
# the server itself (quote_ident), so any name is read as that name, never as SQL.
_PG_COLUMNS = sa.text(
    "SELECT a.attname, format_type(a.atttypid, NULL), b.typname, b.typcategory "
    "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
    "JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END "
    "WHERE a.attrelid = CAST(concat_ws('.', quote_ident(CAST(:schema AS text)), "
    "quote_ident(CAST(:table AS text))) AS regclass) AND a.attnum > 0 AND NOT a.attisdropped"
)
# a row version: which table (partition), where in it, which transaction wrote it
_ROW_VERSION = "CAST(tableoid AS text) || ':' || CAST(ctid AS text) || ':' || CAST(xmin AS text)"
_PG_ROW_VERSIONS = sa.text(
    "SELECT CASE WHEN c.relkind IN ('r', 'p') THEN has_column_privilege(c.oid, 'tableoid', 'SELECT') "
    "AND has_column_privilege(c.oid, 'ctid', 'SELECT') AND has_column_privilege(c.oid, 'xmin', 'SELECT') "
    "ELSE false END FROM pg_class c WHERE c.oid = CAST(concat_ws('.', quote_ident(CAST(:schema AS text)), "
    "quote_ident(CAST(:table AS text))) AS regclass)"
)
_PLAIN_SQL_NAME = re.compile(r"[a-z_][a-z0-9_]*", re.ASCII)  # needs no quotes (but for reserved words)
_TEXT_KEY_TYPES = frozenset({"text", "character varying", "bpchar"})  # format_type without a length: any text
_INT_KEY_BOUNDS = {"smallint": 2**15, "integer": 2**31, "bigint": 2**63}
_INT_KEY = re.compile(r"-?[0-9]{1,19}", re.ASCII)
_STAMP_KINDS = {"timestamptz": "tz", "timestamp": "naive", "date": "date"}
_UNIX_TYPES = frozenset({"int2", "int4", "int8", "numeric", "float4", "float8"})  # numbers: Unix times or compact dates


class Source:
    def __init__(self, engine: sa.Engine, cols: SourceColumns):
        self.cols = cols
        self.engine = engine
        self.dialect = engine.dialect.name
        self.zone: dt.tzinfo = zoneinfo.ZoneInfo(cols.timezone) if cols.timezone else UTC
        self.is_pg = self.dialect == "postgresql"
        self._types = self._reflect(engine, cols)
        self.table = sa.table(
            cols.table,
            *[sa.column(name) for name in dict.fromkeys(self._names)],
            schema=cols.schema,
        )
        c = self.table.c
        self.id_col = c[cols.ticket_id]
        self.key_col = sa.cast(self.id_col, sa.Text) if self.is_pg else self.id_col
        self.stamps = {name: self._stamp_kind(name) for name in (cols.created_at, cols.updated_at)}
        self.not_iso: dict[str, int] = {}  # text column -> its values SQL cannot narrow by (`not_iso_count`)
        self.row_versions = self.is_pg and self._row_versions_readable(engine)
        self.hashes_in_db = self.is_pg and self._hashable(engine)

    @property
    def _names(self) -> list[str]:
        return self.cols.read

    def _texts(self) -> tuple[sa.ColumnElement, sa.ColumnElement]:
        """(subject, body) as read: a table without a subject column (`TICKETS_COL_SUBJECT=none`) gives NULL, as
        a row without a subject does, so its content hashes and model inputs are those of the body alone."""
        c = self.table.c
        subject = c[self.cols.subject] if self.cols.subject else sa.cast(sa.null(), sa.Text)
        return subject, c[self.cols.body]

    @property
    def where(self) -> str:
        """The table as messages name it (`shown_name`: awkward names in double quotes)."""
        table = shown_name(self.cols.table)
        return f"{shown_name(self.cols.schema)}.{table}" if self.cols.schema else table

    @property
    def _relation(self) -> dict[str, str | None]:
        """The bind parameters naming the source relation in `_PG_COLUMNS` and `_PG_ROW_VERSIONS`."""
        return {"schema": self.cols.schema, "table": self.cols.table}

    def sql_name(self, name: str) -> str:
        """A column name as SQL writes it (in double quotes unless lower case, plain and not a reserved word),
        for the fixes messages suggest (`CAST("Created At" AS timestamptz)`); never compiled into a statement."""
        if _PLAIN_SQL_NAME.fullmatch(name) and name not in self.engine.dialect.identifier_preparer.reserved_words:
            return name
        return quoted_name(name)

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
                f"source table {self.where} has no column(s) {', '.join(map(shown_name, missing))}: set the "
                "TICKETS_COL_* variables"
            )
        if not self.is_pg:
            return {}
        with engine.connect() as conn:
            rows = conn.execute(_PG_COLUMNS, self._relation).all()
        return {name: (declared, base, category) for name, declared, base, category in rows}

    def _row_versions_readable(self, engine: sa.Engine) -> bool:
        """Whether this source is a table whose rows' system columns this role may read (see the module's
        "Row versions"): a view has none, and a grant on other columns does not cover them."""
        with engine.connect() as conn:
            return bool(conn.scalar(_PG_ROW_VERSIONS, self._relation))

    def _hashable(self, engine: sa.Engine) -> bool:
        """Whether the database computes plan's content hashes (the module's "Hashes in the database")."""
        if any(self._types[name][1] not in sql.HASHED_TYPES for name in self.text_columns):
            return False
        with engine.connect() as conn:
            return sql.can_hash(conn)

    @property
    def text_columns(self) -> list[str]:
        """The columns holding the ticket's text: subject (where there is one) and body."""
        return [n for n in (self.cols.subject, self.cols.body) if n is not None]

    def _stamp_kind(self, name: str) -> str:
        """How a timestamp column's values are compared: tz, naive, date, text, unix (numbers: Unix times or
        compact local dates), or unsupported:<type name>."""
        if not self.is_pg:
            return "text"  # SQLite: ISO-8601 text (as SQLAlchemy writes it) or numbers; `check` verifies it
        declared, base, category = self._types[name]
        if base in _STAMP_KINDS:
            return _STAMP_KINDS[base]
        if base in _UNIX_TYPES:
            return "unix"
        return "text" if category == "S" else f"unsupported:{declared}"

    def check(self, conn: sa.Connection | None = None) -> None:
        """Refuses, before anything is written, a source that cannot be read by instant and by key (ConfigError
        naming the column and the fix); see inference.store.source_check."""
        if conn is None:
            with self.engine.connect() as own:
                return check_source(self, own)
        return check_source(self, conn)

    # --- reading ------------------------------------------------------------------------------------------------

    def key_of(self, value: Any) -> str | None:
        return (None if value is None else str(value)) if self.is_pg else sqlite_key(value)

    def _select(self, row_version: bool = False, digest: bool = False) -> sa.Select:
        """The columns every read takes, unordered: sorting rows that carry text would make the database
        (SQLite in this process) hold them all; the order is read separately, IDs only (`order`).
        `row_version`: and the row's version (see "Row versions"); `digest`: and, last, its content hash
        computed by the database (only where `hashes_in_db`)."""
        c, cols = self.table.c, self.cols
        subject, body = self._texts()
        if not self.is_pg:  # SQLite: a value of any storage class (a blob, a number) as the text it holds
            subject, body = sa.cast(subject, sa.Text), sa.cast(body, sa.Text)
        stmt = sa.select(self.key_col, subject, body, c[cols.created_at], c[cols.updated_at])
        if row_version:
            stmt = stmt.add_columns(sa.literal_column(_ROW_VERSION))
        return stmt.add_columns(sql.digest(subject, body)) if digest else stmt

    def _plan_select(self) -> sa.Select:
        """Plan's read: `_select`, or where the database hashes, (key, subject, body, created, updated, hash,
        characters, surely visible), subject and body NULL where surely visible."""
        if not self.hashes_in_db:
            return self._select()
        c, cols = self.table.c, self.cols
        subject, body = self._texts()
        sure = sql.surely_visible(subject, body)
        unsure = [sa.case((sure, sa.null()), else_=col) for col in (subject, body)]
        return sa.select(
            self.key_col,
            *unsure,
            c[cols.created_at],
            c[cols.updated_at],
            sql.digest(subject, body),
            sql.chars(subject, body),
            sure,
        )

    @property
    def plans_in_db(self) -> bool:
        """Whether plan's read of a window runs inside the database (the module's "Hashes in the database")."""
        return self.hashes_in_db and all(self.stamps[n] == "tz" for n in (self.cols.created_at, self.cols.updated_at))

    def _plain(self) -> sa.ColumnElement[bool]:
        """The rows the database plans alone: a key that can be stored, surely visible text, finite timestamps.
        Never NULL."""
        c, cols = self.table.c, self.cols
        return sa.and_(
            self.key_col.is_not(None),
            sa.func.coalesce(sa.func.octet_length(self.key_col) <= MAX_ID_BYTES, False),
            sql.surely_visible(*self._texts()),
            sql.finite(c[cols.created_at]),
            sql.finite(c[cols.updated_at]),
        )

    def window_plan_rows(self, window: Window) -> sa.Select:
        """Where `plans_in_db`: the window's plain rows (`_plain`) as plan's table of source rows wants them
        (ticket_id, id_problem, version_us, content_hash, empty, chars), computed by the database
        (planning.open_tables writes them); `scan_window(..., rest=True)` reads the others."""
        c, cols = self.table.c, self.cols
        subject, body = self._texts()
        return sa.select(
            self.key_col,
            sa.null(),
            sql.version_micros(c[cols.created_at], c[cols.updated_at]),
            sql.digest(subject, body),
            sa.false(),
            sql.chars(subject, body),
        ).where(self._window_filter(window), self._plain())

    def _version(self, row) -> dt.datetime:
        """updated_at, or created_at where it is NULL, as an instant."""
        created = self._instant(row[3], self.cols.created_at)
        updated = self._instant(row[4], self.cols.updated_at)
        return updated or created or NO_TIME

    def _instant(self, value: Any, column: str) -> dt.datetime | None:
        try:
            return to_instant(value, self.zone, self.cols.date_order)
        except (ValueError, OverflowError):
            env_name = "TICKETS_COL_CREATED_AT" if column == self.cols.created_at else "TICKETS_COL_UPDATED_AT"
            raise ConfigError(
                f"{env_name}: a value of column {shown_name(column)} of {self.where} is not a readable timestamp "
                f"({TEXT_SHAPES}, or a number: {NUMBER_TIME}): fix it, or point {env_name} at a view column that "
                "converts it"
            ) from None

    def _in_window(self, window: Window, created: Any, updated: Any) -> bool:
        """Whether a row's created or updated instant is in [start, end)."""
        instants = (self._instant(created, self.cols.created_at), self._instant(updated, self.cols.updated_at))
        return any(t is not None and window.start <= t < window.end for t in instants)

    def not_iso_count(self, conn: sa.Connection, name: str) -> int:
        """Values of a text timestamp column SQL cannot narrow a window by: text other than plain ISO-8601
        (SQLite: other than that or a plausible Unix time). Counted once per Source (a scan of the column)."""
        if name not in self.not_iso:
            self.not_iso[name] = not_iso_stamps(self, conn, name)
            if self.not_iso[name]:
                log.info(
                    "source column %s: %d text timestamp(s) not in plain ISO-8601: each window reads every row of "
                    "%s and checks its instant (no text range narrows them)",
                    shown_name(name),
                    self.not_iso[name],
                    self.where,
                )
        return self.not_iso[name]

    def _window_filter(self, window: Window, conn: sa.Connection | None = None) -> sa.ColumnElement[bool]:
        """SQL that keeps every row of the window and a margin around it (callers check each row's instants
        exactly); no narrowing at all where a text column holds values that are not plain ISO-8601 (`conn`
        counts them)."""
        parts = []
        for name in (self.cols.created_at, self.cols.updated_at):
            col, kind = self.table.c[name], self.stamps[name]
            if kind == "text" and (conn is None or self.not_iso_count(conn, name)):
                if conn is None:
                    raise ValueError("a text timestamp column is narrowed only after counting its values")
                return sa.true()  # read and checked row by row: no text range holds them
            if kind == "unix":  # Unix times or compact local dates
                parts.append(in_number_spans(col, window.start, window.end, self.zone))
                continue
            if kind == "text" and not self.is_pg:  # SQLite: ISO text or Unix times (others: not narrowed, above)
                parts.append(in_unix_spans(col, window.start, window.end))
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
                col = sa.collate(col, "C" if self.is_pg else "BINARY")
            parts.append(sa.and_(col >= lo, col < hi))
        return sa.or_(*parts)

    def _stream(self, conn: sa.Connection, stmt, params: dict | None = None, text: bool = True) -> Iterator[sa.Row]:
        """Rows a few at a time: about TEXT_BUDGET characters of subject and body (columns 1 and 2, where `text`)
        per fetch."""
        result = conn.execute(stmt, params or {}, execution_options={"stream_results": True})
        size = FIRST_FETCH
        try:
            while rows := result.fetchmany(size):
                chars = sum(len(r[1] or "") + len(r[2] or "") for r in rows) if text and len(rows[0]) > 2 else 0
                yield from rows
                size = max(1, min(MAX_FETCH, TEXT_BUDGET // max(1, chars // len(rows))))
                rows = None
        finally:
            result.close()

    def _window_rows(self, conn: sa.Connection, window: Window, stmt: sa.Select | None = None) -> Iterator[sa.Row]:
        """Rows created or updated in [start, end) by instant (duplicates too), unordered."""
        stmt = self._select() if stmt is None else stmt
        for row in self._stream(conn, stmt.where(self._window_filter(window, conn))):
            if self._in_window(window, row[3], row[4]):
                yield row

    def _plan_row(self, row) -> SourceRow:
        subject, body = row[1], row[2]
        if len(row) > 5:  # hashed by the database (`_plan_select`)
            digest, chars, empty = row[5], row[6], not (row[7] or has_text(subject, body))
        else:
            digest = content_hash(subject, body)
            chars, empty = len(subject or "") + len(body or ""), not has_text(subject, body)
        key = self.key_of(row[0])
        problem = id_problem(key)
        if problem is not None:
            key = surrogate_key(problem, row[0], digest)
        return SourceRow(key, problem, self._version(row), digest, empty, chars)

    def order(
        self, conn: sa.Connection, window: Window | None = None, keys: Iterable[str] | None = None
    ) -> dict[str, int]:
        """key -> its position in the source's own ID order (numbers numerically, text by the column's
        collation), for the window's rows or for these keys: only IDs are sorted."""
        stmt = sa.select(self.key_col).order_by(self.id_col)
        if window is not None:
            c = self.table.c
            stmt = stmt.add_columns(c[self.cols.created_at], c[self.cols.updated_at])
            streamed = self._stream(conn, stmt.where(self._window_filter(window, conn)), text=False)
            rows: Iterable = (r for r in streamed if self._in_window(window, r[1], r[2]))
        else:
            found = self._rows_for_keys(conn, keys or (), sa.select(self.key_col, self.id_col), text=False)
            rows = sorted(found, key=lambda r: sort_key(r[1]))
        out: dict[str, int] = {}
        for row in rows:
            out.setdefault(self.key_of(row[0]), len(out))
        return out

    def scan_window(self, conn: sa.Connection, window: Window, rest: bool = False) -> Iterator[SourceRow]:
        """Plan's read of the window: every row (duplicates included), unordered, no text; `rest`: only the rows
        `window_plan_rows` leaves out."""
        stmt = self._plan_select().where(sa.not_(self._plain())) if rest else self._plan_select()
        for row in self._window_rows(conn, window, stmt):
            yield self._plan_row(row)

    def scan_ids(self, conn: sa.Connection, keys: Iterable[str]) -> Iterator[SourceRow]:
        """Plan's read of named tickets (duplicates included), no text."""
        for row in self._rows_for_keys(conn, keys, self._plan_select()):
            yield self._plan_row(row)

    def in_window(self, conn: sa.Connection, window: Window) -> Iterator[SourceTicket]:
        """Tickets created or updated in [start, end) with their whole text, one per row (duplicates too)."""
        for row in self._window_rows(conn, window):
            key = self.key_of(row[0])
            if id_problem(key) is None:
                yield SourceTicket(key, row[1], row[2], self._version(row))

    # --- lookups by key -----------------------------------------------------------------------------------------

    def _lookup(self, keys: list[str]) -> tuple[sa.ColumnElement[bool], dict]:
        if self.is_pg:
            array = sa.cast(sa.bindparam("keys", type_=postgresql.ARRAY(sa.Text)), postgresql.ARRAY(self._key_type()))
            return self.id_col == sa.any_(array), {"keys": keys}
        values = [v for k in keys for v in sqlite_values(k)]
        return self.id_col.in_(sa.bindparam("ids", expanding=True)), {"ids": values}

    def _key_type(self) -> PgType:
        """PostgreSQL: the type a key (text) is cast to for a lookup by the key column's index."""
        declared, base, _ = self._types[self.cols.ticket_id]
        return PgType("bpchar" if base == "bpchar" else declared)

    def _surely_cast(self, keys: list[str]) -> bool:
        """PostgreSQL: whether every key surely casts to the key column's type (the keys infer and load look up
        are the source's own), so a page needs no savepoint to survive a failing cast: a text type, or an
        integer type and keys that are its canonical digits within its range. Anything else: False."""
        declared, _, _ = self._types[self.cols.ticket_id]
        if declared in _TEXT_KEY_TYPES:
            return True
        bound = _INT_KEY_BOUNDS.get(declared)
        return bound is not None and all(_INT_KEY.fullmatch(k) and -bound <= int(k) < bound for k in keys)

    def _rows_for_keys(
        self, conn: sa.Connection, keys: Iterable[str], stmt: sa.Select, text: bool = True
    ) -> Iterator[sa.Row]:
        """The rows of these keys (all of them: duplicates too), a page of keys per statement; rows carrying
        `text` are streamed a few at a time, ID-only rows fetched at once."""
        for page in in_pages((k for k in keys if id_problem(k) is None), page_size(self.dialect)):
            wanted = set(page)
            yield from (r for r in self._page(conn, page, stmt, text) if self.key_of(r[0]) in wanted)

    def _fetch(self, conn: sa.Connection, stmt, params: dict, text: bool) -> Iterator[sa.Row]:
        return self._stream(conn, stmt, params) if text else iter(conn.execute(stmt, params).all())

    def _page(self, conn: sa.Connection, page: list[str], stmt: sa.Select, text: bool = True) -> Iterator[sa.Row]:
        where, params = self._lookup(page)
        if not self.is_pg or self._surely_cast(page):  # no savepoint: the cast cannot fail
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

    def _winners(
        self,
        conn: sa.Connection,
        keys: Iterable[str],
        make: Callable[[sa.Row, str, dt.datetime], Any],
        row_versions: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """key -> make(row, digest, version time) of the key's newest row (then the highest content hash:
        deterministic). `row_versions` (where the source has them): filled with key -> its rows' versions."""
        marked = row_versions is not None and self.row_versions
        hashed = self.hashes_in_db  # the database hashes the text it sends (the same bytes as content_hash)
        seen_versions: dict[str, list[str]] = {}
        best: dict[str, tuple[dt.datetime, str, Any]] = {}
        for row in self._rows_for_keys(conn, keys, self._select(marked, hashed)):
            digest = row[-1] if hashed else content_hash(row[1], row[2])
            key, version = self.key_of(row[0]), self._version(row)
            if marked:
                seen_versions.setdefault(key, []).append(row[5])
            seen = best.get(key)
            if seen is None or (version, digest) > seen[:2]:
                best[key] = (version, digest, make(row, digest, version))
        if marked:
            row_versions.update((key, _joined(found)) for key, found in seen_versions.items())
        return {key: value for key, (_, _, value) in best.items()}

    def by_ids(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, SourceTicket]:
        """Current rows (whole text) for these keys; keys that no longer exist are absent from the answer."""
        return self._winners(
            conn, ticket_ids, lambda row, _d, at: SourceTicket(self.key_of(row[0]), row[1], row[2], at)
        )

    def model_inputs(
        self, conn: sa.Connection, ticket_ids: Iterable[str], text_of: Callable[[str | None, str | None], tuple]
    ) -> dict[str, TicketInput]:
        """Current model inputs and content hashes for these keys: `text_of(subject, body)` (the predictor's
        input policy: `Predictor.input_text`) is applied to each row as it is read; whole texts are not kept.
        Where the source has row versions, each input carries its ticket's (`TicketInput.row_version`)."""

        def make(row, digest: str, at: dt.datetime) -> tuple:
            return (at, digest, *text_of(row[1], row[2]))

        found: dict[str, str] = {}
        inputs = self._winners(conn, ticket_ids, make, found)
        return {key: TicketInput(key, *made, found.get(key)) for key, made in inputs.items()}

    def versions(
        self,
        conn: sa.Connection,
        ticket_ids: Iterable[str],
        as_read: Mapping[str, tuple[str, SourceVersion]] | None = None,
    ) -> dict[str, SourceVersion]:
        """What each ticket is now (content hash of its current text, version time), no text kept.
        `as_read`: key -> (its row versions, what it was) when last read: a ticket whose rows are still those
        row versions is still that, and its text is not read again (see "Row versions")."""
        keys = list(ticket_ids)
        out: dict[str, SourceVersion] = {}
        if as_read and self.row_versions:
            out = {key: as_read[key][1] for key in self._unchanged(conn, [k for k in keys if k in as_read], as_read)}
            keys = [k for k in keys if k not in out]
        out.update(self._winners(conn, keys, lambda _row, digest, at: SourceVersion(digest, at)))
        return out

    def _unchanged(
        self, conn: sa.Connection, keys: list[str], as_read: Mapping[str, tuple[str, SourceVersion]]
    ) -> list[str]:
        """Those of these keys whose rows are exactly the row versions recorded (reads no text)."""
        now: dict[str, list[str]] = {}
        stmt = sa.select(self.key_col, sa.literal_column(_ROW_VERSION)).select_from(self.table)
        for row in self._rows_for_keys(conn, keys, stmt, text=False):
            now.setdefault(self.key_of(row[0]), []).append(row[1])
        return [k for k in keys if k in now and _joined(now[k]) == as_read[k][0]]

    def holds_key(self, key: sa.ColumnElement) -> sa.ColumnElement[bool] | None:
        """PostgreSQL: true where the source holds a row whose key is `key` (a text column of another table,
        correlated), found by the key column's index; None on SQLite (use `existing`). The statement fails
        (DataError) for a text the key column's type cannot hold: use `existing` for such keys."""
        if not self.is_pg:
            return None
        typed = sa.cast(key, self._key_type())
        # the key column only: a role may hold SELECT on the columns the pipeline reads and no others
        return sa.select(self.id_col).where(self.id_col == typed, self.key_col == key).exists()

    def existing(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> set[str]:
        """Which of these keys the source still holds (reads IDs only)."""
        stmt = sa.select(self.key_col)
        return {self.key_of(r[0]) for r in self._rows_for_keys(conn, ticket_ids, stmt, text=False)}


def _joined(row_versions: list[str]) -> str:
    """A key's row versions as one value: the same rows give the same value, whatever order they came in."""
    return ";".join(sorted(row_versions))
