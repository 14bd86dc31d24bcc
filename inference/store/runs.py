"""Run bookkeeping: the run row, its per-ticket items, staged outputs and failures.

Every function takes a connection inside the caller's transaction, so each pipeline step decides
what commits together (all-or-nothing per chunk).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from inference.errors import RunNotFound
from inference.records import Failure
from inference.store import schema as s
from inference.store.bulk import copy_into_temp
from inference.store.db import insert_for, utcnow
from inference.window import Window

ITEM_INSERT_PAGE = 5000


def start_run(conn: sa.Connection, run_id: str, window: Window, model_version: str, options: dict) -> None:
    """(Re)creates the run row and forgets a previous plan of the same run: planning is repeatable."""
    now = utcnow()
    conn.execute(sa.delete(s.inference_staging).where(s.inference_staging.c.run_id == run_id))
    conn.execute(sa.delete(s.inference_run_items).where(s.inference_run_items.c.run_id == run_id))
    values = dict(
        window_start=window.start,
        window_end=window.end,
        model_version=model_version,
        status="planned",
        options=options,
        backlog=0,
        succeeded=0,
        failed=0,
        skipped=0,
        shards=0,
        real_tokens=0,
        padded_tokens=0,
        device_seconds=0.0,
        planned_at=now,
        finished_at=None,
        error=None,
    )
    stmt = insert_for(conn)(s.inference_runs).values(run_id=run_id, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=["run_id"], set_=values))


def get_run(conn: sa.Connection, run_id: str) -> sa.Row:
    row = conn.execute(sa.select(s.inference_runs).where(s.inference_runs.c.run_id == run_id)).first()
    if row is None:
        raise RunNotFound(f"run {run_id!r} has not been planned (no row in inference_runs)")
    return row


def update_run(conn: sa.Connection, run_id: str, **values) -> None:
    conn.execute(sa.update(s.inference_runs).where(s.inference_runs.c.run_id == run_id).values(**values))


def add_run_metrics(conn: sa.Connection, run_id: str, real_tokens: int, padded_tokens: int, seconds: float) -> None:
    r = s.inference_runs.c
    conn.execute(
        sa.update(s.inference_runs)
        .where(r.run_id == run_id)
        .values(
            real_tokens=r.real_tokens + real_tokens,
            padded_tokens=r.padded_tokens + padded_tokens,
            device_seconds=r.device_seconds + seconds,
        )
    )


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
    ids = sorted(set(ticket_ids))
    open_: set[str] = set()
    for k in range(0, len(ids), 1000):
        stmt = (
            sa.select(i.ticket_id)
            .where(
                i.run_id == run_id,
                i.ticket_id.in_(sa.bindparam("ids", expanding=True)),
                i.status.in_([s.ITEM_PLANNED, s.ITEM_FAILED]),
            )
            .order_by(i.ticket_id)
            .with_for_update()
        )
        open_.update(conn.scalars(stmt, {"ids": ids[k : k + 1000]}))
    return open_


def claim(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str]) -> None:
    """Counts an attempt before the model sees the items, committed first: if the process dies in the
    model, the next attempt knows which items were in flight."""
    i = s.inference_run_items.c
    stmt = (
        sa.update(s.inference_run_items)
        .where(i.run_id == run_id, i.ticket_id.in_(sa.bindparam("ids", expanding=True)))
        .values(attempts=i.attempts + 1)
    )
    ids = sorted(ticket_ids)
    for k in range(0, len(ids), 1000):
        conn.execute(stmt, {"ids": ids[k : k + 1000]})


def set_items(conn: sa.Connection, run_id: str, ticket_ids: Iterable[str], status: str, reason: str | None) -> None:
    ids = sorted(set(ticket_ids))
    if not ids:
        return
    i = s.inference_run_items.c
    stmt = (
        sa.update(s.inference_run_items)
        .where(i.run_id == run_id, i.ticket_id.in_(sa.bindparam("ids", expanding=True)))
        .values(status=status, reason=reason)
    )
    for k in range(0, len(ids), 1000):
        conn.execute(stmt, {"ids": ids[k : k + 1000]})


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


def stage(conn: sa.Connection, rows: Sequence[dict]) -> None:
    """Keyed by (run, ticket): a second copy of the same shard adds nothing."""
    if not rows:
        return
    stmt = insert_for(conn)(s.inference_staging)
    if conn.dialect.name == "postgresql":
        twin = copy_into_temp(conn, s.inference_staging, rows)
        columns = [c.name for c in s.inference_staging.columns]
        stmt = stmt.from_select(columns, sa.select(*[twin.c[n] for n in columns]).order_by(twin.c.ticket_id))
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", "ticket_id"]))
    else:
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", "ticket_id"]), list(rows))


def staged_page(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[sa.Row]:
    st = s.inference_staging.c
    stmt = (
        sa.select(s.inference_staging)
        .where(st.run_id == run_id, st.ticket_id > after)
        .order_by(st.ticket_id)
        .limit(limit)
    )
    return list(conn.execute(stmt))


def unstage(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str]) -> None:
    st = s.inference_staging.c
    stmt = sa.delete(s.inference_staging).where(
        st.run_id == run_id, st.ticket_id.in_(sa.bindparam("ids", expanding=True))
    )
    for k in range(0, len(ticket_ids), 1000):
        conn.execute(stmt, {"ids": list(ticket_ids[k : k + 1000])})


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
    ids = sorted({x.ticket_id for x in failures})
    attempts = dict(
        conn.execute(
            sa.select(i.ticket_id, i.attempts).where(
                i.run_id == run_id, i.ticket_id.in_(sa.bindparam("ids", expanding=True))
            ),
            {"ids": ids},
        ).all()
    )
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
        .where(f.ticket_id.in_(sa.bindparam("ids", expanding=True)), f.status != s.FAILURE_RESOLVED)
        .values(status=s.FAILURE_RESOLVED, updated_at=utcnow())
    )
    ids = sorted(ticket_ids)
    for k in range(0, len(ids), 1000):
        conn.execute(stmt, {"ids": ids[k : k + 1000]})


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


def succeeded_without_result(conn: sa.Connection, run_id: str) -> int:
    """Succeeded items whose ticket has no result row: must be zero (matched by ID, never by position)."""
    i, r = s.inference_run_items.c, s.ticket_results.c
    stmt = (
        sa.select(sa.func.count())
        .select_from(s.inference_run_items.outerjoin(s.ticket_results, r.ticket_id == i.ticket_id))
        .where(i.run_id == run_id, i.status == s.ITEM_SUCCEEDED, r.ticket_id.is_(None))
    )
    return conn.scalar(stmt) or 0


def recent_runs(conn: sa.Connection, limit: int = 10) -> list[sa.Row]:
    r = s.inference_runs.c
    return list(conn.execute(sa.select(s.inference_runs).order_by(r.planned_at.desc()).limit(limit)))


def as_dict(row: sa.Row) -> dict:
    out = dict(row._mapping)
    for key, value in out.items():
        if isinstance(value, dt.datetime):
            out[key] = value.isoformat()
    return out
