"""PostgreSQL bulk writes: COPY into a temporary table, then one INSERT .. SELECT .. ON CONFLICT.

Row-by-row statements cost a round trip each and SQLAlchemy's per-row parameter processing costs
more than the server's work; COPY sends the whole chunk in one stream (see BENCHMARKS.md).
The temporary table lives per connection and empties itself at commit, so a chunk's COPY and merge
are one transaction: all or nothing.
"""

from __future__ import annotations

import datetime as dt
import io
import threading
from collections.abc import Sequence

import sqlalchemy as sa

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


def copy_into_temp(conn: sa.Connection, table: sa.Table, rows: Sequence[dict]) -> sa.Table:
    """COPY the rows (every column of `table`) into its temporary twin; returns the twin."""
    twin = temp_twin(table)
    conn.exec_driver_sql(
        f'CREATE TEMPORARY TABLE IF NOT EXISTS "{twin.name}" '
        f'(LIKE "{table.name}" INCLUDING DEFAULTS) ON COMMIT DELETE ROWS'
    )
    columns = list(table.columns)
    formats = [(c.name, _formatter(c)) for c in columns]
    buffer = io.StringIO()
    buffer.writelines("\t".join([fmt(row.get(name)) for name, fmt in formats]) + "\n" for row in rows)
    buffer.seek(0)
    names = ", ".join(f'"{c.name}"' for c in columns)
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.copy_expert(f'COPY "{twin.name}" ({names}) FROM STDIN', buffer)
    finally:
        cursor.close()
    return twin
