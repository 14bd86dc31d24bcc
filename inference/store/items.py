"""Per-run accounting: one item per backlog ticket, from planned to its final state."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from inference.store import schema as s
from inference.store.db import id_pages, ids_in, ids_in_span

ITEM_INSERT_PAGE = 5000


def add_items(conn: sa.Connection, rows: Sequence[dict]) -> None:
    for i in range(0, len(rows), ITEM_INSERT_PAGE):
        conn.execute(sa.insert(s.inference_run_items), list(rows[i : i + ITEM_INSERT_PAGE]))


def pending_items(conn: sa.Connection, run_id: str, shard: int, after: str, limit: int) -> list[tuple[str, int]]:
    """Next page (by ticket_id) of a shard's tickets that still need the model, with their attempts.

    attempts > 0 on a planned item means a process took it to the model and died before committing.
    """
    i = s.inference_run_items.c
    stmt = (
        sa.select(i.ticket_id, i.attempts)
        .where(i.run_id == run_id, i.shard == shard, i.status == s.ITEM_PLANNED, i.ticket_id > after)
        .order_by(i.ticket_id)
        .limit(limit)
    )
    return [(t, a) for t, a in conn.execute(stmt)]


def lock_open_items(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str]) -> set[str]:
    """Of these items, those still waiting for the model (planned, or failed and being retried),
    locked for this transaction (FOR UPDATE on PostgreSQL; SQLite write transactions are exclusive)."""
    i = s.inference_run_items.c
    open_: set[str] = set()
    for page in id_pages(conn, ticket_ids):
        stmt = (
            sa.select(i.ticket_id)
            .where(
                i.run_id == run_id,
                ids_in(conn, i.ticket_id),
                i.status.in_([s.ITEM_PLANNED, s.ITEM_FAILED]),
            )
            .order_by(i.ticket_id)
            .with_for_update()
        )
        open_.update(conn.scalars(stmt, {"ids": page}))
    return open_


def take_open_items(
    conn: sa.Connection, run_id: str, ticket_ids: Iterable[str], status: str, *, dense: bool = False
) -> set[str]:
    """Of these items, those still waiting for the model (see `lock_open_items`), given `status` (reason
    cleared) and so locked for this transaction: one UPDATE .. RETURNING instead of a lock and then an update.
    The caller sets another state, in the same transaction, on any of them that turns out otherwise. Rows are
    taken in ticket_id order (the index's), as `lock_open_items` takes them, so writers cannot deadlock.
    `dense`: the items are a chunk of consecutive items of a shard (see `db.ids_in_span`)."""
    i = s.inference_run_items.c
    within = (ids_in_span if dense else ids_in)(conn, i.ticket_id)
    stmt = (
        sa.update(s.inference_run_items)
        .where(i.run_id == run_id, within, i.status.in_([s.ITEM_PLANNED, s.ITEM_FAILED]))
        .values(status=status, reason=None)
        .returning(i.ticket_id)
    )
    return {t for page in id_pages(conn, ticket_ids) for t in conn.scalars(stmt, {"ids": page})}


def claim(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str], *, dense: bool = False) -> None:
    """Counts an attempt before the model sees the items, committed first: if the process dies in the
    model, the next attempt knows which items were in flight. `dense`: as in `take_open_items`."""
    i = s.inference_run_items.c
    stmt = (
        sa.update(s.inference_run_items)
        .where(i.run_id == run_id, (ids_in_span if dense else ids_in)(conn, i.ticket_id))
        .values(attempts=i.attempts + 1)
    )
    for page in id_pages(conn, ticket_ids):
        conn.execute(stmt, {"ids": page})


def set_items(conn: sa.Connection, run_id: str, ticket_ids: Iterable[str], status: str, reason: str | None) -> None:
    i = s.inference_run_items.c
    stmt = (
        sa.update(s.inference_run_items)
        .where(i.run_id == run_id, ids_in(conn, i.ticket_id))
        .values(status=status, reason=reason)
    )
    for page in id_pages(conn, ticket_ids):
        conn.execute(stmt, {"ids": page})


def item_counts(conn: sa.Connection, run_id: str) -> dict[str, int]:
    i = s.inference_run_items.c
    stmt = sa.select(i.status, sa.func.count()).where(i.run_id == run_id).group_by(i.status)
    return {status: n for status, n in conn.execute(stmt)}


def skip_reasons(conn: sa.Connection, run_id: str) -> dict[str, int]:
    i = s.inference_run_items.c
    stmt = (
        sa.select(i.reason, sa.func.count())
        .where(i.run_id == run_id, i.status.in_([s.ITEM_SKIPPED, s.ITEM_FAILED]))
        .group_by(i.reason)
    )
    return {reason or "unknown": n for reason, n in conn.execute(stmt)}


def unfinished_by_shard(conn: sa.Connection, run_id: str) -> tuple[dict[int, int], int]:
    """(shard -> tickets still planned, tickets staged but not loaded): which tasks did not finish."""
    i = s.inference_run_items.c
    stmt = (
        sa.select(i.shard, i.status, sa.func.count())
        .where(i.run_id == run_id, i.status.in_([s.ITEM_PLANNED, s.ITEM_STAGED]))
        .group_by(i.shard, i.status)
        .order_by(i.shard)
    )
    planned: dict[int, int] = {}
    staged = 0
    for shard, status, n in conn.execute(stmt):
        if status == s.ITEM_PLANNED:
            planned[shard] = planned.get(shard, 0) + n
        else:
            staged += n
    return planned, staged


def item_ids(conn: sa.Connection, run_id: str, ticket_ids: Iterable[str]) -> set[str]:
    """Which of these tickets have an item in the run (a staged row without one is never written)."""
    i = s.inference_run_items.c
    stmt = sa.select(i.ticket_id).where(i.run_id == run_id, ids_in(conn, i.ticket_id))
    return {t for page in id_pages(conn, ticket_ids) for t in conn.scalars(stmt, {"ids": page})}
