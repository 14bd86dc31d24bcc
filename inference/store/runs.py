"""The run row: one per run (window, model version, options, counts, metrics).

Every function in inference.store takes a connection inside the caller's transaction, so each pipeline
step decides what commits together (all-or-nothing per chunk).
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from inference.errors import RunNotFound
from inference.store import schema as s
from inference.store.db import insert_for, utcnow
from inference.window import Window


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
        source_duplicates=0,
        retracted=0,
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
