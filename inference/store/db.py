"""Engines and the little that differs between PostgreSQL (production) and SQLite (embedded default)."""

from __future__ import annotations

import datetime as dt
import errno
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from inference.errors import (
    ConfigError,
    DatabaseError,
    DatabaseFull,
    DatabaseRefused,
    DatabaseUnavailable,
    InferenceError,
)
from inference.window import UTC, as_utc


class UTCDateTime(sa.TypeDecorator):
    """Timezone-aware UTC in Python; timestamptz on PostgreSQL, naive UTC text on SQLite."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        value = as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        if isinstance(value, str):  # a source table written by something else
            value = dt.datetime.fromisoformat(value)
        return as_utc(value)


def make_engine(url: str, **kwargs) -> sa.Engine:
    """Every engine of the library: parameters never in error messages, errors scrubbed (see `scrub`)."""
    kwargs.setdefault("hide_parameters", True)
    engine = _make_engine(url, **kwargs)
    sa.event.listen(engine, "handle_error", _scrub_on_error)
    return engine


def _make_engine(url: str, **kwargs) -> sa.Engine:
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            try:
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseUnavailable(
                    f"cannot create the directory of the SQLite database {parsed.database} "
                    f"({type(exc).__name__}): check TICKETS_DB_URL or the Airflow connection 'tickets_db'"
                ) from None
        engine = sa.create_engine(url, connect_args={"timeout": 60}, **kwargs)
        sa.event.listen(engine, "connect", _sqlite_on_connect)
        sa.event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":  # no driver named: SQLAlchemy 2.1 would take psycopg 3 if installed
            parsed = parsed.set(drivername="postgresql+psycopg2")
        elif parsed.get_driver_name() != "psycopg2":
            raise ConfigError(
                f"the database URL names the driver {parsed.get_driver_name()!r}: the pipeline writes in bulk with "
                "psycopg2's COPY; use postgresql+psycopg2://... (or postgresql://, which means the same here)"
            )
        # The URL's own libpq options (e.g. from the tickets_db connection's extra) are kept, UTC added.
        query = parsed.query
        connect_args = {
            "options": " ".join(filter(None, ["-c timezone=UTC", query.get("options")])),
            "connect_timeout": int(query.get("connect_timeout") or 10),
            "application_name": query.get("application_name") or "ticket-inference",
        }
        return sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True, **kwargs)
    return sa.create_engine(url, **kwargs)


def _sqlite_on_connect(dbapi_conn, _record) -> None:
    # Invalid UTF-8 can sit in SQLite text; keep the bytes (hashing stays exact) instead of crashing.
    dbapi_conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see _sqlite_on_begin)
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    _set_wal(cur)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


SQLITE_BUSY_MS = 60_000


def _set_wal(cur, pause: float = 0.05) -> None:
    # Turning a new file to WAL needs its exclusive lock, and SQLite answers "database is locked" at once,
    # without its busy handler, to a process that races another doing the same (several first starts at
    # once). So wait here, for as long as busy_timeout would, before giving up.
    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _sqlite_busy(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)


def _sqlite_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _sqlite_on_begin(conn) -> None:
    # Write transactions (see `writing`) take the lock up front with IMMEDIATE, so two writers queue
    # on busy_timeout instead of failing on a read-to-write upgrade. Reads stay DEFERRED (WAL: no blocking).
    conn.exec_driver_sql("BEGIN " + conn.get_execution_options().get("sqlite_begin", "DEFERRED"))


def writing(engine: sa.Engine):
    """A write transaction (context manager): commits on success, rolls back on any error."""
    return engine.execution_options(sqlite_begin="IMMEDIATE").begin()


def insert_for(conn: sa.Connection):
    """The dialect's INSERT construct, which has on_conflict_do_update/do_nothing."""
    name = conn.dialect.name
    if name == "postgresql":
        return postgresql.insert
    if name == "sqlite":
        return sqlite.insert
    raise DatabaseUnavailable(f"unsupported database dialect {name!r}: use PostgreSQL or SQLite")


def check_connection(engine: sa.Engine) -> None:
    """Fail early with a message that says what to fix; never echoes the password."""
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except sa.exc.SQLAlchemyError as exc:
        safe_url = engine.url.render_as_string(hide_password=True)
        raise DatabaseUnavailable(
            f"cannot connect to the tickets database at {safe_url} ({type(exc.orig or exc).__name__}): "
            "check TICKETS_DB_URL or the Airflow connection 'tickets_db', and that the server is running"
        ) from None


# --- database errors: scrubbed here, once, for every caller ---------------------------------------------
#
# A database error can quote row values in three places: SQLAlchemy's `[parameters: ...]` (hide_parameters,
# above), the server's DETAIL/CONTEXT lines (PostgreSQL's `Failing row contains (...)`, COPY's `line 1,
# column body: "..."`, `Key (...)=(...)`) and a quoted value in the message itself (`invalid input syntax for
# type integer: "..."`). Every engine made by make_engine rewrites its errors in place before they are raised
# (the `handle_error` event), so logs, tracebacks, task logs, the CLI and alerts only ever see the scrubbed
# text: the first line of the message, with quoted values replaced unless they are names the server reports
# (table, column, constraint, schema, type), plus the SQLSTATE. Driver calls made outside SQLAlchemy (COPY)
# go through `scrubbed_driver_call`.

_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')
_NAME_FIELDS = ("table_name", "column_name", "constraint_name", "schema_name", "datatype_name")
MAX_ERROR_TEXT = 300
MAX_STATEMENT_TEXT = 500
_SCRUBBED = "_inference_scrubbed"


def scrubbed_text(exc: BaseException) -> str:
    """The part of a driver's error that names things and never quotes a value."""
    diag = getattr(exc, "diag", None)
    names: set[str] = set()
    primary = sqlstate = None
    if diag is not None:  # psycopg2: the server's fields, separately
        primary = getattr(diag, "message_primary", None)
        sqlstate = getattr(diag, "sqlstate", None)
        names = {v for v in (getattr(diag, f, None) for f in _NAME_FIELDS) if v}
    sqlstate = sqlstate or getattr(exc, "pgcode", None) or getattr(exc, "sqlstate", None)
    if not primary:
        arg = exc.args[0] if exc.args else ""
        text = arg if isinstance(arg, str) else type(exc).__name__
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        primary = lines[0] if lines else type(exc).__name__
    primary = re.sub(r"^(ERROR|FATAL|PANIC):\s+", "", primary.strip())
    primary = _QUOTED.sub(lambda m: m.group(0) if (m.group(1) or m.group(2) or "") in names else '"…"', primary)
    if len(primary) > MAX_ERROR_TEXT:
        primary = primary[:MAX_ERROR_TEXT] + "…"
    return f"{primary} [SQLSTATE {sqlstate}]" if sqlstate else primary


def scrub(exc: BaseException) -> BaseException:
    """Rewrites a database error (SQLAlchemy's and the driver's under it) in place; returns it."""
    if getattr(exc, _SCRUBBED, False):
        return exc
    if isinstance(exc, sa.exc.StatementError):
        orig = exc.orig
        if orig is not None:
            scrub(orig)
            exc.args = (f"({type(orig).__module__}.{type(orig).__name__}) {orig.args[0] if orig.args else ''}",)
        else:
            exc.args = (scrubbed_text(exc),)
        exc.hide_parameters = True
        exc.params = None
        if exc.statement and len(exc.statement) > MAX_STATEMENT_TEXT:
            exc.statement = exc.statement[:MAX_STATEMENT_TEXT] + " …"
    elif isinstance(exc, sa.exc.SQLAlchemyError):
        pass  # raised by SQLAlchemy itself, not quoting rows
    else:
        try:
            exc.args = (scrubbed_text(exc),)
        except (AttributeError, TypeError):  # pragma: no cover - an exception type with read-only args
            return exc
    try:
        setattr(exc, _SCRUBBED, True)
    except (AttributeError, TypeError):  # pragma: no cover
        pass
    return exc


def _scrub_on_error(context) -> None:
    scrub(context.original_exception)
    if context.sqlalchemy_exception is not None:
        scrub(context.sqlalchemy_exception)


class scrubbed_driver_call:  # noqa: N801 - used as a context manager, like a function
    """Around driver calls made outside SQLAlchemy (COPY through the raw cursor): errors scrubbed alike."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, InferenceError):
            scrub(exc)
        return False


_PG_FULL = {"53100"}  # disk_full
_SQLITE_FULL = 13  # SQLITE_FULL
_DISCONNECT_CLASSES = ("08", "57P")


def database_error(exc: BaseException) -> InferenceError | None:
    """The library's error for a database error (scrubbed), or None when `exc` is not one.

    Disk full -> DatabaseFull; a constraint or trigger refusing rows -> DatabaseRefused (permanent: the same
    rows would be refused again); a lost connection -> DatabaseUnavailable; anything else -> DatabaseError.
    The message is the scrubbed driver text, never a row.
    """
    if isinstance(exc, InferenceError):
        return None
    orig = exc.orig if isinstance(exc, sa.exc.StatementError) else exc
    if isinstance(orig, OSError) and orig.errno == errno.ENOSPC:
        return DatabaseFull(f"no space left on device: {orig.strerror or 'ENOSPC'}")
    if not isinstance(exc, sa.exc.DBAPIError) and not _is_driver_error(orig):
        return None
    scrub(exc)
    text = scrubbed_text(orig) if orig is not None else scrubbed_text(exc)
    sqlstate = getattr(orig, "pgcode", None) or ""
    sqlite_code = getattr(orig, "sqlite_errorcode", None)
    if sqlstate in _PG_FULL or sqlite_code == _SQLITE_FULL or "disk is full" in text or "No space left" in text:
        return DatabaseFull(f"the database is full: {text}")
    if sqlstate.startswith("23") or sqlstate == "P0001" or type(orig).__name__ == "IntegrityError":
        return DatabaseRefused(f"the database refused a write: {text}")
    if getattr(exc, "connection_invalidated", False) or sqlstate.startswith(_DISCONNECT_CLASSES):
        return DatabaseUnavailable(f"lost the connection to the tickets database: {text}")
    return DatabaseError(f"database error: {text}")


def _is_driver_error(exc: BaseException | None) -> bool:
    if exc is None:
        return False
    module = type(exc).__module__ or ""
    return module.startswith(("psycopg2", "psycopg", "sqlite3", "_sqlite3", "asyncpg"))


def utcnow() -> dt.datetime:
    return dt.datetime.now(UTC)


IN_PAGE = 1000  # IN-list size per statement: well under every driver's parameter limit
ARRAY_PAGE = 10_000  # IDs per statement on PostgreSQL: one array parameter, no parameter limit


def ids_in(conn: sa.Connection, col: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """`col` is one of the page of text IDs bound as "ids": on PostgreSQL `col = ANY(:ids)`, one array parameter
    (SQLAlchemy's expanding IN list costs the client a named parameter per ID, more than the server's work);
    elsewhere the expanding IN list."""
    if conn.dialect.name == "postgresql":
        return col == sa.any_(sa.bindparam("ids", type_=postgresql.ARRAY(sa.Text)))
    return col.in_(sa.bindparam("ids", expanding=True))


def ids_in_span(conn: sa.Connection, col: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """`ids_in`, for a page of IDs that are the next ones in the order of an index on `col` (infer_shard's chunks:
    consecutive items of a shard). On PostgreSQL the page is also bounded by its least and greatest ID, taken by
    the database in the column's collation (a table of this package's schema: the database's default), so the
    index is read as one range instead of one descent per ID, and `= ANY` filters within it. Consecutive pages
    read disjoint ranges: linear in the index whatever else it holds, but a sparse page reads all between."""
    if conn.dialect.name != "postgresql":
        return ids_in(conn, col)
    given = sa.func.unnest(sa.bindparam("ids", type_=postgresql.ARRAY(sa.Text))).column_valued("given_id")
    least = sa.select(sa.func.min(given)).scalar_subquery()
    greatest = sa.select(sa.func.max(given)).scalar_subquery()
    return sa.and_(col >= least, col <= greatest, ids_in(conn, col))


def page_size(dialect: str) -> int:
    """IDs per statement: ARRAY_PAGE on PostgreSQL (`ids_in` binds one array), IN_PAGE elsewhere."""
    return ARRAY_PAGE if dialect == "postgresql" else IN_PAGE


def id_pages(conn: sa.Connection, ids: Iterable) -> Iterator[list]:
    """`in_pages` of the size this connection's dialect takes (`page_size`)."""
    return in_pages(ids, page_size(conn.dialect.name))


def in_pages(ids: Iterable, size: int = IN_PAGE) -> Iterator[list]:
    """Sorted, de-duplicated pages of IDs for statements on `ids_in` (or `col.in_(bindparam("ids", expanding=True))`).

    Sorted so that every writer locks rows in the same order (no deadlocks between concurrent steps)."""
    ordered = sorted(set(ids))
    for k in range(0, len(ordered), size):
        yield ordered[k : k + size]
