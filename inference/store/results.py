"""The idempotent upsert into ticket_results, with its stale-write guard.

What decides whether a result is current is the content hash of the ticket's current text, never a timestamp
alone: load_results writes only outputs whose hash matches the source's current text, just read. The guard in
the upsert protects that decision from a concurrent writer (a backfill, a second copy) in the moments between:

- a result of the current model version (the version of the most recently planned run) is never replaced by
  another version's output;
- otherwise the incoming row replaces the stored one when its source version is later, or the same with a
  different text or model version, or it is the same text moving to the current model version.

A row the guard refuses although its text is the current one (the source's `updated_at` went backwards: a
restore, clock skew) is written by `replace_if_unchanged` once the caller has checked the source again:
a compare-and-swap on the stored row, so a stale result never stays because of a timestamp.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from inference.store.bulk import copy_into_temp
from inference.store.db import id_pages, ids_in, insert_for
from inference.store.schema import inference_runs, inference_staging, ticket_results

# Every column but the key and the first-written time: a newer result replaces all of the old one.
UPDATED_ON_CONFLICT = tuple(c.name for c in ticket_results.columns if c.name not in ("ticket_id", "created_at"))


def newest_per_ticket(rows: Iterable[dict]) -> list[dict]:
    """One row per ticket_id (the newest source version; the later row on a tie), in ticket_id order.

    A statement may not touch one row twice (PostgreSQL refuses), and sorted keys keep lock order
    the same for every writer, so concurrent upserts cannot deadlock.
    """
    best: dict[str, dict] = {}
    for row in rows:
        seen = best.get(row["ticket_id"])
        if seen is None or row["source_updated_at"] >= seen["source_updated_at"]:
            best[row["ticket_id"]] = row
    return [best[k] for k in sorted(best)]


def _current_select() -> sa.Select:
    r = inference_runs.c
    return (
        sa.select(r.model_version).where(r.status != "dry_run").order_by(r.planned_at.desc(), r.run_id.desc()).limit(1)
    )


def current_model_version(conn: sa.Connection) -> str | None:
    """The model version of the most recently planned run (dry runs aside): the deployment's current one.
    A late or concurrent run of another version never replaces its results."""
    return conn.scalar(_current_select())


# `current_model_version` read by the upsert statement itself (no round trip of its own): '' where no run is
# planned yet, which no model version equals, so the guard then only asks for a newer row, as with None.
CURRENT_VERSION = sa.func.coalesce(_current_select().scalar_subquery(), "")


def upsert_results(
    conn: sa.Connection, rows: Iterable[dict], current_version: str | sa.ColumnElement | None = None
) -> set[str]:
    """INSERT .. ON CONFLICT (ticket_id) DO UPDATE, only where the incoming row is newer (see the module).

    An older version of a ticket never overwrites a newer result, a result of `current_version` is never
    replaced by another version's, and writing the same result twice changes nothing. Returns the IDs
    actually written.
    """
    rows = newest_per_ticket(rows)
    if not rows:
        return set()
    stmt = insert_for(conn)(ticket_results)
    if conn.dialect.name == "postgresql":  # one COPY, then one merge statement
        twin = copy_into_temp(conn, ticket_results, rows)
        columns = [c.name for c in ticket_results.columns]
        stmt = stmt.from_select(columns, sa.select(*[twin.c[n] for n in columns]).order_by(twin.c.ticket_id))
    stmt = _guarded(stmt, current_version)
    if conn.dialect.name == "postgresql":
        return {r[0] for r in conn.execute(stmt)}
    return {r[0] for r in conn.execute(stmt, rows)}


def upsert_staged(
    conn: sa.Connection,
    run_id: str,
    versions: Mapping[str, dt.datetime],
    model_id: str,
    now: dt.datetime,
    current_version: str | sa.ColumnElement | None = None,
) -> set[str]:
    """PostgreSQL: upsert_results for the run's staged rows of these tickets, straight from inference_staging
    (INSERT .. SELECT: the outputs are not read back into Python and sent again), each with the source version
    time given (the ticket's current one). The caller has read and validated these staged rows in this
    transaction, with their row locks held, so what is written is what was validated. Same guard, same answer."""
    if not versions:
        return set()
    st = inference_staging.c
    ids = sorted(versions)
    given = sa.select(
        sa.func.unnest(sa.bindparam("ids", ids, type_=postgresql.ARRAY(sa.Text))).label("ticket_id"),
        sa.func.unnest(
            sa.bindparam("at", [versions[t] for t in ids], type_=postgresql.ARRAY(sa.DateTime(timezone=True)))
        ).label("version_at"),
    ).subquery("given")
    values = {
        "model_id": sa.literal(model_id, sa.String),
        "source_updated_at": given.c.version_at,
        "created_at": sa.literal(now, ticket_results.c.created_at.type),
        "updated_at": sa.literal(now, ticket_results.c.updated_at.type),
    }
    columns = [c.name for c in ticket_results.columns]
    select = (
        sa.select(*[values[n].label(n) if n in values else st[n] for n in columns])
        .select_from(inference_staging.join(given, given.c.ticket_id == st.ticket_id))
        .where(st.run_id == run_id)
        .order_by(st.ticket_id)
    )
    stmt = _guarded(insert_for(conn)(ticket_results).from_select(columns, select), current_version)
    return {r[0] for r in conn.execute(stmt)}


def _guarded(stmt, current_version: str | sa.ColumnElement | None):
    """ON CONFLICT (ticket_id) DO UPDATE with the guard of the module's docstring, RETURNING the written IDs.
    `current_version`: a version, or CURRENT_VERSION (the database reads it in the statement)."""
    new, cur = stmt.excluded, ticket_results.c
    is_newer = sa.or_(
        cur.source_updated_at < new.source_updated_at,
        sa.and_(
            cur.source_updated_at == new.source_updated_at,
            sa.or_(cur.content_hash != new.content_hash, cur.model_version != new.model_version),
        ),
    )
    where = is_newer
    if current_version is not None:
        now_current = (
            current_version if isinstance(current_version, sa.ColumnElement) else sa.literal(current_version, sa.String)
        )
        upgrade = sa.and_(
            cur.content_hash == new.content_hash, cur.model_version != now_current, new.model_version == now_current
        )
        protected = sa.and_(cur.model_version == now_current, new.model_version != now_current)
        where = sa.and_(sa.not_(protected), sa.or_(is_newer, upgrade))
    return stmt.on_conflict_do_update(
        index_elements=[cur.ticket_id],
        set_={name: new[name] for name in UPDATED_ON_CONFLICT},
        where=where,
    ).returning(cur.ticket_id)


def replace_if_unchanged(conn: sa.Connection, row: Mapping, expected: sa.Row) -> bool:
    """Replaces the stored result of row's ticket by `row`, only if it is still exactly `expected` (its
    content hash, model version and source version): a compare-and-swap. True when it was replaced."""
    c = ticket_results.c
    stmt = (
        sa.update(ticket_results)
        .where(
            c.ticket_id == row["ticket_id"],
            c.content_hash == expected.content_hash,
            c.model_version == expected.model_version,
            c.source_updated_at == expected.source_updated_at,
        )
        .values({name: row[name] for name in UPDATED_ON_CONFLICT})
    )
    return conn.execute(stmt).rowcount == 1


def current_versions(conn: sa.Connection, ticket_ids: list[str]) -> dict[str, tuple[str, str]]:
    """ticket_id -> (content_hash, model_version) of the stored result."""
    return {t: (r.content_hash, r.model_version) for t, r in stored_rows(conn, ticket_ids).items()}


def stored_rows(conn: sa.Connection, ticket_ids: Iterable[str]) -> dict[str, sa.Row]:
    """ticket_id -> (ticket_id, content_hash, model_version, source_updated_at) of the stored result."""
    c = ticket_results.c
    stmt = sa.select(c.ticket_id, c.content_hash, c.model_version, c.source_updated_at).where(ids_in(conn, c.ticket_id))
    out: dict[str, sa.Row] = {}
    for page in id_pages(conn, ticket_ids):
        out.update({r.ticket_id: r for r in conn.execute(stmt, {"ids": page})})
    return out


def retract_results(conn: sa.Connection, ticket_ids: list[str]) -> int:
    """Deletes the results of these tickets (emptied, or gone from the source); returns how many went."""
    stmt = sa.delete(ticket_results).where(ids_in(conn, ticket_results.c.ticket_id))
    return sum(conn.execute(stmt, {"ids": page}).rowcount for page in id_pages(conn, ticket_ids))


def result_ids_after(conn: sa.Connection, after: str, limit: int) -> list[str]:
    """The next page of result ticket IDs (keyset order): the retraction sweep's cursor."""
    c = ticket_results.c
    stmt = sa.select(c.ticket_id).where(c.ticket_id > after).order_by(c.ticket_id).limit(limit)
    return list(conn.scalars(stmt))
