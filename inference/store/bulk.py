"""PostgreSQL bulk writes: COPY into a temporary table, then one INSERT .. SELECT .. ON CONFLICT.

Row-by-row statements cost a round trip each and SQLAlchemy's per-row parameter processing costs
more than the server's work; COPY sends the whole chunk in one stream (see BENCHMARKS.md).
The temporary table lives per connection and empties itself at commit, so a chunk's COPY and merge
are one transaction: all or nothing.

COPY uses PostgreSQL's binary format when every column's type has a binary encoder here (embeddings
travel as their raw bytes instead of twice as many hex digits the server must parse); otherwise the
text format. The encoders are chosen from the column types the database reports, not assumed.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
import threading
from collections.abc import Sequence

import sqlalchemy as sa

from inference.store.db import scrubbed_driver_call

_temp_metadata = sa.MetaData()
_temp_tables: dict[str, sa.Table] = {}
_temp_lock = threading.Lock()  # write-behind and main threads may ask for a twin at the same time


def temp_twin(table: sa.Table) -> sa.Table:
    """A same-shaped `<table>_in` temporary table, created in this transaction's connection on demand."""
    name = f"{table.name}_in"
    with _temp_lock:
        if name not in _temp_tables:
            _temp_tables[name] = sa.Table(name, _temp_metadata, *[sa.Column(c.name, c.type) for c in table.columns])
        return _temp_tables[name]


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _text(value: object) -> str:
    return "\\N" if value is None else str(value).translate(_ESCAPES)


def _formatter(column: sa.Column):
    """COPY text format for one column type (chosen once per column, not per value)."""
    kind = column.type.python_type if not isinstance(column.type, sa.LargeBinary) else bytes
    if kind is bytes:
        return lambda v: "\\N" if v is None else "\\\\x" + bytes(v).hex()
    if kind is bool:
        return lambda v: "\\N" if v is None else ("t" if v else "f")
    if kind in (int, float):
        return lambda v: "\\N" if v is None else repr(v)
    if kind is dt.datetime:
        return lambda v: "\\N" if v is None else v.isoformat()
    return _text


_PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_NULL = struct.pack(">i", -1)


def _sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def _binary_timestamptz(v: dt.datetime) -> bytes:
    if v.tzinfo is None:  # naive means UTC here, as in UTCDateTime
        v = v.replace(tzinfo=dt.UTC)
    delta = v - _PG_EPOCH
    return b"\x00\x00\x00\x08" + struct.pack(
        ">q", (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    )


def _fixed(fmt: str):
    packer = struct.Struct(">i" + fmt)
    size = packer.size - 4
    return lambda v: packer.pack(size, v)


# PostgreSQL type (format_type) -> value -> length-prefixed binary field
_BINARY = {
    "text": lambda v: _sized(v.encode("utf-8")),
    "character varying": lambda v: _sized(v.encode("utf-8")),
    "bytea": lambda v: _sized(bytes(v)),
    "integer": _fixed("i"),
    "bigint": _fixed("q"),
    "smallint": _fixed("h"),
    "double precision": _fixed("d"),
    "real": _fixed("f"),
    "boolean": lambda v: b"\x00\x00\x00\x01" + (b"\x01" if v else b"\x00"),
    "timestamp with time zone": _binary_timestamptz,
}


def _pg_types(conn: sa.Connection, table: sa.Table) -> dict[str, str]:
    rows = conn.execute(
        sa.text(
            "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute "
            "WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 AND NOT attisdropped"
        ),
        {"t": f'"{table.name}"' if table.schema is None else f'"{table.schema}"."{table.name}"'},
    )
    return dict(rows.all())


def _binary_payload(columns: list[sa.Column], types: dict[str, str], rows: Sequence[dict]) -> io.BytesIO | None:
    encoders = [(c.name, _BINARY.get(types.get(c.name, ""))) for c in columns]
    if any(enc is None for _, enc in encoders):
        return None
    count = struct.pack(">h", len(encoders))
    out = io.BytesIO()
    out.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
    write = out.write
    for row in rows:
        write(count)
        for name, enc in encoders:
            value = row.get(name)
            write(_NULL if value is None else enc(value))
    write(struct.pack(">h", -1))
    out.seek(0)
    return out


def copy_into_temp(conn: sa.Connection, table: sa.Table, rows: Sequence[dict]) -> sa.Table:
    """COPY the rows (every column of `table`) into its temporary twin; returns the twin."""
    twin = temp_twin(table)
    conn.exec_driver_sql(
        f'CREATE TEMPORARY TABLE IF NOT EXISTS "{twin.name}" '
        f'(LIKE "{table.name}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
    )
    copy_rows(conn, table, rows, into=twin.name)
    return twin


def copy_rows(conn: sa.Connection, table: sa.Table, rows: Sequence[dict], into: str | None = None) -> None:
    """COPY the rows (every column of `table`) into `table` itself, or into the same-shaped table `into`."""
    columns = list(table.columns)
    names = ", ".join(f'"{c.name}"' for c in columns)
    target = into or table.name
    payload = _binary_payload(columns, _pg_types(conn, table), rows)
    if payload is not None:
        sql = f'COPY "{target}" ({names}) FROM STDIN WITH (FORMAT binary)'
    else:
        formats = [(c.name, _formatter(c)) for c in columns]
        payload = io.StringIO()
        payload.writelines("\t".join([fmt(row.get(name)) for name, fmt in formats]) + "\n" for row in rows)
        payload.seek(0)
        sql = f'COPY "{target}" ({names}) FROM STDIN'
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        with scrubbed_driver_call():  # the server's CONTEXT line of a refused COPY quotes the row
            cursor.copy_expert(sql, payload)
    finally:
        cursor.close()


def analyze(engine: sa.Engine, table: sa.Table) -> None:
    """Fresh planner statistics for `table` after a bulk change (PostgreSQL; a role that does not own the table
    gets a warning, not an error). A table that grew by a million rows since it was last analyzed is otherwise
    read with plans made for a small one (a bitmap scan of the whole table for each page), and autovacuum may be
    off or behind: a night cannot wait for it. On a connection of its own (autocommit, outside the pool), so
    the pooled connections' transactions are the same with or without it."""
    if engine.dialect.name != "postgresql":
        return
    from inference.store.db import make_engine

    own = make_engine(engine.url.render_as_string(hide_password=False), poolclass=sa.pool.NullPool)
    try:
        with own.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f'ANALYZE "{table.name}"')
    finally:
        own.dispose()
