"""Reads the source tickets table, whatever its name and column names (see config.SourceColumns)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

import sqlalchemy as sa

from inference.config import SourceColumns
from inference.errors import ConfigError
from inference.records import SourceTicket
from inference.store.db import UTCDateTime, in_pages
from inference.window import Window


class Source:
    def __init__(self, engine: sa.Engine, cols: SourceColumns):
        self.cols = cols
        self._id_type = self._reflect(engine, cols)
        self.table = sa.table(
            cols.table,
            sa.column(cols.ticket_id),
            sa.column(cols.subject, sa.Text),
            sa.column(cols.body, sa.Text),
            sa.column(cols.created_at, UTCDateTime),
            sa.column(cols.updated_at, UTCDateTime),
            schema=cols.schema,
        )
        c = self.table.c
        self._id = c[cols.ticket_id]
        # coalesce takes its type (UTCDateTime) from its arguments
        self._version = sa.func.coalesce(c[cols.updated_at], c[cols.created_at]).label("version_at")

    @staticmethod
    def _reflect(engine: sa.Engine, cols: SourceColumns) -> type:
        where = f"{cols.schema}.{cols.table}" if cols.schema else cols.table
        try:
            found = {c["name"]: c for c in sa.inspect(engine).get_columns(cols.table, schema=cols.schema)}
        except sa.exc.NoSuchTableError:
            raise ConfigError(
                f"source table {where} does not exist: set TICKETS_SOURCE_TABLE (and TICKETS_SOURCE_SCHEMA), "
                "or create the demo backlog with `python -m inference seed`"
            ) from None
        wanted = [cols.ticket_id, cols.subject, cols.body, cols.created_at, cols.updated_at]
        missing = [name for name in wanted if name not in found]
        if missing:
            raise ConfigError(
                f"source table {where} has no column(s) {', '.join(missing)}: set the TICKETS_COL_* variables"
            )
        try:
            return int if found[cols.ticket_id]["type"].python_type is int else str
        except NotImplementedError:
            return str

    def _select(self) -> sa.Select:
        c = self.table.c
        return sa.select(self._id, c[self.cols.subject], c[self.cols.body], self._version)

    def _row(self, row) -> SourceTicket:
        return SourceTicket(str(row[0]), row[1], row[2], row[3])

    def in_window(self, conn: sa.Connection, window: Window) -> Iterator[SourceTicket]:
        """Tickets created or updated in [start, end), streamed (server-side cursor on PostgreSQL)."""
        c = self.table.c
        created, updated = c[self.cols.created_at], c[self.cols.updated_at]
        start = sa.bindparam("start", window.start, type_=UTCDateTime)
        end = sa.bindparam("end", window.end, type_=UTCDateTime)
        stmt = self._select().where(
            sa.or_(sa.and_(created >= start, created < end), sa.and_(updated >= start, updated < end))
        )
        for row in conn.execution_options(yield_per=2000).execute(stmt):
            yield self._row(row)

    def by_ids(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, SourceTicket]:
        """Current rows for these IDs; IDs that no longer exist are absent from the answer."""
        stmt = self._select().where(self._id.in_(sa.bindparam("ids", expanding=True)))
        out: dict[str, SourceTicket] = {}
        for page in in_pages(ticket_ids):
            for row in conn.execute(stmt, {"ids": [self._key(t) for t in page]}):
                ticket = self._row(row)
                out[ticket.ticket_id] = ticket
        return out

    def versions(self, conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, dt.datetime]:
        """Current version timestamps only (no text): is what we computed still the latest?"""
        stmt = sa.select(self._id, self._version).where(self._id.in_(sa.bindparam("ids", expanding=True)))
        out: dict[str, dt.datetime] = {}
        for page in in_pages(ticket_ids):
            out.update({str(row[0]): row[1] for row in conn.execute(stmt, {"ids": [self._key(t) for t in page]})})
        return out

    def _key(self, ticket_id: str):
        return int(ticket_id) if self._id_type is int else ticket_id
