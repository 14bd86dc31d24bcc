"""Failures: one row per (run, ticket) that failed, pending a retry, dead-lettered or resolved."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from inference.records import Failure
from inference.store import schema as s
from inference.store.db import id_pages, ids_in, insert_for, utcnow


def record_failures(
    conn: sa.Connection, run_id: str, model_version: str, failures: Sequence[Failure], max_attempts: int
) -> dict[str, str]:
    """Marks the items failed and upserts one failure row per (run, ticket); `attempt` is the item's
    claimed attempts (see `claim`).

    Returns ticket_id -> failure status (pending while retryable attempts remain, else dead_letter).
    """
    if not failures:
        return {}
    i, f = s.inference_run_items.c, s.ticket_failures.c
    stmt = sa.select(i.ticket_id, i.attempts).where(i.run_id == run_id, ids_in(conn, i.ticket_id))
    attempts: dict[str, int] = {}
    for page in id_pages(conn, (x.ticket_id for x in failures)):
        attempts.update(conn.execute(stmt, {"ids": page}).all())
    now, statuses = utcnow(), {}
    for failure in sorted(failures, key=lambda x: x.ticket_id):
        attempt = max(attempts.get(failure.ticket_id, 0), 1)
        status = s.FAILURE_PENDING if failure.retryable and attempt < max_attempts else s.FAILURE_DEAD
        statuses[failure.ticket_id] = status
        values = dict(
            attempt=attempt,
            content_hash=failure.content_hash,
            model_version=model_version,
            error_class=str(failure.kind),
            retryable=failure.retryable,
            status=status,
            message=failure.message[:500],
            updated_at=now,
        )
        stmt = insert_for(conn)(s.ticket_failures).values(
            run_id=run_id, ticket_id=failure.ticket_id, created_at=now, **values
        )
        conn.execute(stmt.on_conflict_do_update(index_elements=[f.run_id, f.ticket_id], set_=values))
        conn.execute(
            sa.update(s.inference_run_items)
            .where(i.run_id == run_id, i.ticket_id == failure.ticket_id)
            .values(status=s.ITEM_FAILED, reason=str(failure.kind), attempts=attempt)
        )
    return statuses


def resolve_failures(conn: sa.Connection, ticket_ids: Sequence[str]) -> None:
    """A result was written: every open failure of these tickets, in any run, is resolved."""
    f = s.ticket_failures.c
    stmt = (
        sa.update(s.ticket_failures)
        .where(ids_in(conn, f.ticket_id), f.status != s.FAILURE_RESOLVED)
        .values(status=s.FAILURE_RESOLVED, updated_at=utcnow())
    )
    for page in id_pages(conn, ticket_ids):
        conn.execute(stmt, {"ids": page})


def retryable_items(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[str]:
    """Failed items of this run whose failure is still pending a retry."""
    i, f = s.inference_run_items.c, s.ticket_failures.c
    stmt = (
        sa.select(i.ticket_id)
        .join(s.ticket_failures, sa.and_(f.run_id == i.run_id, f.ticket_id == i.ticket_id))
        .where(i.run_id == run_id, i.status == s.ITEM_FAILED, f.status == s.FAILURE_PENDING, i.ticket_id > after)
        .order_by(i.ticket_id)
        .limit(limit)
    )
    return list(conn.scalars(stmt))


def count_retryable(conn: sa.Connection, run_id: str) -> int:
    f = s.ticket_failures.c
    stmt = sa.select(sa.func.count()).where(f.run_id == run_id, f.status == s.FAILURE_PENDING)
    return conn.scalar(stmt) or 0


def count_dead(conn: sa.Connection, run_id: str) -> int:
    f = s.ticket_failures.c
    return conn.scalar(sa.select(sa.func.count()).where(f.run_id == run_id, f.status == s.FAILURE_DEAD)) or 0


def dead_letters(conn: sa.Connection, model_version: str) -> dict[str, set[str]]:
    """ticket_id -> content hashes given up on for this model version (not retried again)."""
    f = s.ticket_failures.c
    stmt = sa.select(f.ticket_id, f.content_hash).where(f.status == s.FAILURE_DEAD, f.model_version == model_version)
    out: dict[str, set[str]] = {}
    for ticket_id, content in conn.execute(stmt):
        out.setdefault(ticket_id, set()).add(content)
    return out
