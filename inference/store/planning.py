"""Plan's working tables: a backlog of any size planned in flat memory.

The source's rows stream into a temporary table (COPY on PostgreSQL), one row per ticket is kept by the
database (the newest version, then the higher content hash), the tickets that need work are judged by one
INSERT .. SELECT (against ticket_results and the dead letters), and the run's items are written by another that
also assigns the shards: contiguous ranges of ticket IDs holding about the same estimated tokens (each shard
within one ticket's tokens of total / shards). So plan holds a page of source rows in Python at a time,
whatever the window's size. All of it happens inside the
caller's transaction: the temporary tables go with it (ON COMMIT DROP; SQLite: dropped first).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

from inference.records import FailureKind, SkipReason
from inference.store.db import scrubbed_driver_call
from inference.store.schema import (
    FAILURE_DEAD,
    ITEM_FAILED,
    ITEM_PLANNED,
    ITEM_SKIPPED,
    inference_run_items,
    ticket_failures,
    ticket_results,
)

_meta = sa.MetaData()
_TEMP = {"prefixes": ["TEMPORARY"], "postgresql_on_commit": "DROP"}

raw = sa.Table(  # every source row read, duplicates included
    "plan_raw",
    _meta,
    sa.Column("ticket_id", sa.Text, nullable=False),
    sa.Column("id_problem", sa.Text),
    sa.Column("version_us", sa.BigInteger, nullable=False),  # microseconds since the epoch: orders on both dialects
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("empty", sa.Boolean, nullable=False),
    sa.Column("chars", sa.BigInteger, nullable=False),
    **_TEMP,
)
rows = sa.Table(  # one row per ticket
    "plan_rows",
    _meta,
    sa.Column("ticket_id", sa.Text, primary_key=True),
    sa.Column("id_problem", sa.Text),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("empty", sa.Boolean, nullable=False),
    sa.Column("chars", sa.BigInteger, nullable=False),
    **_TEMP,
)
candidates = sa.Table(  # the tickets that need work, judged
    "plan_candidates",
    _meta,
    sa.Column("ticket_id", sa.Text, primary_key=True),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("est_tokens", sa.Integer, nullable=False),
    sa.Column("empty", sa.Boolean, nullable=False),
    sa.Column("has_result", sa.Boolean, nullable=False),
    sa.Column("id_problem", sa.Text),
    sa.Column("pos", sa.BigInteger, nullable=False),  # the source's own ID order, for the `limit` option
    **_TEMP,
)
positions = sa.Table(  # the source's own ID order of the window's tickets (the `limit` option only)
    "plan_positions",
    _meta,
    sa.Column("ticket_id", sa.Text, primary_key=True),
    sa.Column("pos", sa.BigInteger, nullable=False),
    **_TEMP,
)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
PAGE = 5000


@dataclass(frozen=True, slots=True)
class Counts:
    backlog: int = 0
    work: int = 0  # to infer
    work_tokens: int = 0
    empty: int = 0
    unsupported: int = 0


def open_tables(conn: sa.Connection, raw_from: sa.Select | None = None) -> int:
    """Creates the working tables; `raw_from`: plan_raw starts with the rows of this select (columns in its
    order: the source rows the database plans itself, Source.window_plan_rows). Returns how many.

    On PostgreSQL that table is made by CREATE TEMPORARY TABLE .. AS, which may scan the source with parallel
    workers (an INSERT .. SELECT never does); its columns are cast to plan_raw's types."""
    tables = [raw, rows, candidates, positions]
    if conn.dialect.name != "postgresql":  # SQLite keeps temporary tables per connection: a pooled one may hold some
        _meta.drop_all(conn, tables=tables, checkfirst=True)
    if raw_from is None or conn.dialect.name != "postgresql":
        _meta.create_all(conn, tables=tables)
        if raw_from is None:
            return 0
        return conn.execute(sa.insert(raw).from_select([c.name for c in raw.columns], raw_from)).rowcount
    _meta.create_all(conn, tables=tables[1:])
    typed = [sa.cast(col, c.type).label(c.name) for col, c in zip(raw_from.selected_columns, raw.columns, strict=True)]
    return conn.execute(_CreateTempAs(raw.name, raw_from.with_only_columns(*typed))).rowcount


class _CreateTempAs(sa.sql.expression.Executable, sa.sql.expression.ClauseElement):
    """CREATE TEMPORARY TABLE <name> ON COMMIT DROP AS <select> (PostgreSQL), its parameters bound as usual."""

    inherit_cache = False

    def __init__(self, name: str, select: sa.Select):
        self.name, self.select = name, select


@compiles(_CreateTempAs, "postgresql")
def _compile_create_temp_as(element: _CreateTempAs, compiler, **kw) -> str:
    name = compiler.preparer.quote(element.name)
    return f"CREATE TEMPORARY TABLE {name} ON COMMIT DROP AS {compiler.process(element.select, **kw)}"


def _write(conn: sa.Connection, table: sa.Table, values: Sequence[tuple] | str) -> None:
    """Rows (tuples in the table's column order) into a working table: COPY (text format) on PostgreSQL.
    On PostgreSQL `values` may already be the COPY text (`copy_text`)."""
    if not values:
        return
    names = [c.name for c in table.columns]
    if conn.dialect.name != "postgresql":
        conn.execute(sa.insert(table), [dict(zip(names, v, strict=True)) for v in values])
        return
    payload = io.StringIO(values if isinstance(values, str) else copy_text(values))
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        with scrubbed_driver_call():  # the server's CONTEXT line of a refused COPY quotes the row
            cursor.copy_expert(f"COPY {table.name} ({', '.join(names)}) FROM STDIN", payload)
    finally:
        cursor.close()


def copy_text(values: Sequence[tuple]) -> str:
    """Rows as COPY's text format."""
    return "".join("\t".join(map(_copy_text, v)) + "\n" for v in values)


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value) -> str:
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    return value.translate(_ESCAPES)


def source_pages(source_rows: Iterable, dialect: str) -> Iterator[tuple[int, Sequence[tuple] | str]]:
    """The source's rows (SourceRow: duplicates included) as pages for plan_raw: (rows, what `_write` takes),
    formatted for COPY already on PostgreSQL, so that reading, hashing and formatting can run on another
    thread than the writes (plan_step)."""
    page: list[tuple] = []
    for r in source_rows:
        page.append((r.ticket_id, r.id_problem, _micros(r.version_at), r.content_hash, r.empty, r.chars))
        if len(page) >= PAGE:
            yield len(page), copy_text(page) if dialect == "postgresql" else page
            page = []
    if page:
        yield len(page), copy_text(page) if dialect == "postgresql" else page


def add_source_pages(conn: sa.Connection, pages: Iterable[tuple[int, Sequence[tuple] | str]]) -> int:
    """Writes `source_pages` into plan_raw; returns how many rows."""
    n = 0
    for count, values in pages:
        _write(conn, raw, values)
        n += count
    return n


def keep_newest(conn: sa.Connection) -> int:
    """One row per ticket in plan_rows: the newest version wins, ties broken by the higher content hash (as
    every reader of the source decides). Returns how many rows were dropped as duplicates."""
    r = raw.c
    rank = (
        sa.func.row_number()
        .over(partition_by=r.ticket_id, order_by=(r.version_us.desc(), r.content_hash.desc()))
        .label("rank")
    )
    names = [c.name for c in rows.columns]
    ranked = sa.select(*[r[n] for n in names], rank).subquery()
    best = sa.select(*[ranked.c[n] for n in names]).where(ranked.c.rank == 1)
    conn.execute(sa.insert(rows).from_select(names, best))
    total = conn.scalar(sa.select(sa.func.count()).select_from(raw)) or 0
    kept = conn.scalar(sa.select(sa.func.count()).select_from(rows)) or 0
    return total - kept


def add_candidates(
    conn: sa.Connection, version: str, force: bool, max_seq_length: int, position: dict[str, int] | None = None
) -> None:
    """The tickets of plan_rows that need work into plan_candidates, judged by one INSERT .. SELECT: no result
    yet, or the text or the model version changed since; a text dead-lettered for this model version waits
    for a change; `force` (reprocess, named tickets): all of them. The SQL twin of inference.plan.needs_work
    (a test holds the two equal). Each gets its token estimate (textprep.tokens_for_chars) and, for the
    `limit` option, its `position` in the source's own ID order (the window's tickets; others go last)."""
    r, t, f, p = rows.c, ticket_results.c, ticket_failures.c, positions.c
    est = 2 + (r.chars + 3) // 4
    stored = rows.outerjoin(ticket_results, sa.and_(t.ticket_id == r.ticket_id, r.id_problem.is_(None)))
    pos: sa.ColumnElement = sa.literal(0, sa.BigInteger)
    if position:
        _write(conn, positions, list(position.items()))
        stored = stored.outerjoin(positions, p.ticket_id == r.ticket_id)
        pos = sa.func.coalesce(p.pos, len(position))
    select = sa.select(
        r.ticket_id,
        r.content_hash,
        sa.case((est < max_seq_length, est), else_=max_seq_length),
        r.empty,
        t.ticket_id.is_not(None),
        r.id_problem,
        pos,
    ).select_from(stored)
    if not force:
        dead = sa.exists().where(
            f.ticket_id == r.ticket_id,
            f.content_hash == r.content_hash,
            f.status == FAILURE_DEAD,
            f.model_version == version,
        )
        changed = sa.or_(t.ticket_id.is_(None), t.content_hash != r.content_hash, t.model_version != version)
        select = select.where(sa.not_(dead), changed)
    names = ["ticket_id", "content_hash", "est_tokens", "empty", "has_result", "id_problem", "pos"]
    conn.execute(sa.insert(candidates).from_select(names, select))


def _chosen(limit: int | None) -> sa.Select:
    """The planned candidates: all, or the first `limit` in the source's own ID order."""
    c = candidates.c
    stmt = sa.select(candidates)
    if limit is not None:
        stmt = stmt.order_by(c.pos, c.ticket_id).limit(limit)
    return stmt


def counts(conn: sa.Connection, limit: int | None) -> Counts:
    chosen = _chosen(limit).subquery()
    c = chosen.c
    work = sa.and_(c.id_problem.is_(None), sa.not_(c.empty))
    stmt = sa.select(
        sa.func.count(),
        sa.func.sum(sa.case((work, 1), else_=0)),
        sa.func.sum(sa.case((work, c.est_tokens), else_=0)),
        sa.func.sum(sa.case((sa.and_(c.id_problem.is_(None), c.empty), 1), else_=0)),
        sa.func.sum(sa.case((c.id_problem.is_not(None), 1), else_=0)),
    )
    return Counts(*[int(v or 0) for v in conn.execute(stmt).one()])


def write_items(conn: sa.Connection, run_id: str, limit: int | None, shards: int, work_tokens: int) -> None:
    """The run's items, one INSERT .. SELECT: failed (unsupported ID), skipped (empty) or planned in a shard.

    Shards are contiguous ranges of ticket IDs: a ticket goes to the shard its tokens' midpoint falls in
    (cumulative estimated tokens, in ID order, times shards over the total), then shards are numbered densely.
    Every window runs over ID order (the midpoints only grow along it, so a shard's dense number is how many
    distinct midpoint shards came before): one pass, no sort of the whole backlog by shard, and the items
    arrive in ID order, so both of their indexes grow at their right edge.
    """
    chosen = _chosen(limit).subquery("chosen")
    c = chosen.c
    by_id = {"order_by": c.ticket_id}
    work = sa.and_(c.id_problem.is_(None), sa.not_(c.empty))
    upto = sa.func.sum(sa.case((work, c.est_tokens), else_=0)).over(**by_id, rows=(None, 0))
    with_upto = sa.select(chosen, work.label("work"), upto.label("upto")).subquery("upto")
    u = with_upto.c
    total = max(work_tokens, 1)
    raw_shard = sa.case(
        (u.work, ((2 * u.upto - u.est_tokens) * shards) // (2 * total)),  # integer division (all positive)
        else_=sa.null(),
    )
    with_raw = sa.select(with_upto, raw_shard.label("raw_shard")).subquery("raw")
    w = with_raw.c
    before = sa.func.max(w.raw_shard).over(order_by=w.ticket_id, rows=(None, -1))  # NULLs (no work) are ignored
    with_before = sa.select(with_raw, before.label("before")).subquery("before")
    b = with_before.c
    starts = sa.case((sa.and_(b.work, sa.or_(b.before.is_(None), b.raw_shard > b.before)), 1), else_=0)
    dense = sa.func.sum(starts).over(order_by=b.ticket_id, rows=(None, 0)) - 1
    shard = sa.case((b.work, dense), else_=-1)
    status = sa.case((b.id_problem.is_not(None), ITEM_FAILED), (b.empty, ITEM_SKIPPED), else_=ITEM_PLANNED)
    reason = sa.case(
        (b.id_problem.is_not(None), str(FailureKind.UNSUPPORTED_ID)),
        (b.empty, str(SkipReason.EMPTY_INPUT)),
        else_=sa.null(),
    )
    select = sa.select(
        sa.literal(run_id, sa.Text),
        b.ticket_id,
        shard,
        b.est_tokens,
        b.content_hash,
        status,
        reason,
        sa.literal(0, sa.Integer),
    ).order_by(b.ticket_id)
    names = ["run_id", "ticket_id", "shard", "est_tokens", "content_hash", "status", "reason", "attempts"]
    conn.execute(sa.insert(inference_run_items).from_select(names, select))


def unsupported(conn: sa.Connection, limit: int | None) -> list[tuple[str, str]]:
    """(ticket_id, content_hash) of the planned candidates whose ID cannot be a key."""
    chosen = _chosen(limit).subquery()
    return [
        tuple(r)
        for r in conn.execute(
            sa.select(chosen.c.ticket_id, chosen.c.content_hash).where(chosen.c.id_problem.is_not(None))
        )
    ]


def emptied(conn: sa.Connection, limit: int | None) -> list[str]:
    """Planned candidates with nothing to embed that have a result of an earlier text (to retract)."""
    chosen = _chosen(limit).subquery()
    c = chosen.c
    return list(conn.scalars(sa.select(c.ticket_id).where(c.empty, c.has_result, c.id_problem.is_(None))))


def shard_sizes(conn: sa.Connection, run_id: str) -> list[tuple[int, int, int]]:
    """(shard, tickets, estimated tokens) of the run's planned shards."""
    i = inference_run_items.c
    stmt = (
        sa.select(i.shard, sa.func.count(), sa.func.sum(i.est_tokens))
        .where(i.run_id == run_id, i.shard >= 0)
        .group_by(i.shard)
        .order_by(i.shard)
    )
    return [(int(k), int(n), int(t or 0)) for k, n, t in conn.execute(stmt)]


def _micros(at: dt.datetime) -> int:
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    delta = at - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
