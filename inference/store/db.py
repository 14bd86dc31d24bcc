"""Engines and the little that differs between PostgreSQL (production) and SQLite (embedded default)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from inference.errors import DatabaseUnavailable
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
        connect_args = {"options": "-c timezone=UTC", "connect_timeout": 10, "application_name": "ticket-inference"}
        return sa.create_engine(url, connect_args=connect_args, pool_pre_ping=True, **kwargs)
    return sa.create_engine(url, **kwargs)


def _sqlite_on_connect(dbapi_conn, _record) -> None:
    # Invalid UTF-8 can sit in SQLite text; keep the bytes (hashing stays exact) instead of crashing.
    dbapi_conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see _sqlite_on_begin)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.close()


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


def utcnow() -> dt.datetime:
    return dt.datetime.now(UTC)


IN_PAGE = 1000  # IN-list size per statement: well under every driver's parameter limit


def in_pages(ids: Iterable, size: int = IN_PAGE) -> Iterator[list]:
    """Sorted, de-duplicated pages of IDs for `col.in_(bindparam("ids", expanding=True))` statements.

    Sorted so that every writer locks rows in the same order (no deadlocks between concurrent steps)."""
    ordered = sorted(set(ids))
    for k in range(0, len(ordered), size):
        yield ordered[k : k + size]
