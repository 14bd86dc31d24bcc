"""The idempotent upsert into ticket_results, with its stale-write guard."""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa

from inference.store.bulk import copy_into_temp
from inference.store.db import in_pages, insert_for
from inference.store.schema import ticket_results

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


def upsert_results(conn: sa.Connection, rows: Iterable[dict]) -> set[str]:
    """INSERT .. ON CONFLICT (ticket_id) DO UPDATE, only where the incoming row is newer.

    Newer means: a later source version, or the same version with a different content hash or model
    version. An older version of a ticket never overwrites a newer result, and writing the same
    result twice changes nothing. Returns the IDs actually written.
    """
    rows = newest_per_ticket(rows)
    if not rows:
        return set()
    stmt = insert_for(conn)(ticket_results)
    if conn.dialect.name == "postgresql":  # one COPY, then one merge statement
        twin = copy_into_temp(conn, ticket_results, rows)
        columns = [c.name for c in ticket_results.columns]
        stmt = stmt.from_select(columns, sa.select(*[twin.c[n] for n in columns]).order_by(twin.c.ticket_id))
    new, cur = stmt.excluded, ticket_results.c
    is_newer = sa.or_(
        cur.source_updated_at < new.source_updated_at,
        sa.and_(
            cur.source_updated_at == new.source_updated_at,
            sa.or_(cur.content_hash != new.content_hash, cur.model_version != new.model_version),
        ),
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[cur.ticket_id],
        set_={name: new[name] for name in UPDATED_ON_CONFLICT},
        where=is_newer,
    ).returning(cur.ticket_id)
    if conn.dialect.name == "postgresql":
        return {r[0] for r in conn.execute(stmt)}
    return {r[0] for r in conn.execute(stmt, rows)}


def current_versions(conn: sa.Connection, ticket_ids: list[str]) -> dict[str, tuple[str, str]]:
    """ticket_id -> (content_hash, model_version) of the stored result."""
    c = ticket_results.c
    stmt = sa.select(c.ticket_id, c.content_hash, c.model_version).where(
        c.ticket_id.in_(sa.bindparam("ids", expanding=True))
    )
    out: dict[str, tuple[str, str]] = {}
    for page in in_pages(ticket_ids):
        out.update({r.ticket_id: (r.content_hash, r.model_version) for r in conn.execute(stmt, {"ids": page})})
    return out


def retract_results(conn: sa.Connection, ticket_ids: list[str]) -> None:
    """Deletes results whose ticket no longer has anything to embed (emptied since)."""
    stmt = sa.delete(ticket_results).where(ticket_results.c.ticket_id.in_(sa.bindparam("ids", expanding=True)))
    for page in in_pages(ticket_ids):
        conn.execute(stmt, {"ids": page})
