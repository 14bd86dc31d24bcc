"""Run metrics: one row per committed chunk (inference_chunks) and one per step invocation (inference_steps).

Counts, timings and histograms only (token lengths, batch sizes, category labels), never ticket text. A chunk's
row commits in the chunk's own transaction, so what a killed task had done stays on record; a step's row is
written when it starts and closed when it ends, so a step that died shows as never finished.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from inference.store import schema as s
from inference.store.db import insert_for, utcnow

STEP_RUNNING, STEP_SUCCEEDED, STEP_FAILED = "running", "succeeded", "failed"
NO_SHARD = -1


def add_chunk(
    conn: sa.Connection,
    *,
    run_id: str,
    step: str,
    shard: int,
    step_started_at: dt.datetime,
    seq: int,
    tickets: int,
    staged: int,
    failed: int,
    skipped: int,
    truncated: int,
    uncertain: int,
    real_tokens: int,
    padded_tokens: int,
    model_seconds: float,
    batch_sizes: Sequence[int],
    token_lengths: Mapping[int, int],
    categories: Mapping[str, int],
    committed_at: dt.datetime | None = None,
) -> None:
    conn.execute(
        sa.insert(s.inference_chunks).values(
            run_id=run_id,
            step=step,
            shard=shard,
            step_started_at=step_started_at,
            seq=seq,
            committed_at=committed_at or utcnow(),
            tickets=tickets,
            staged=staged,
            failed=failed,
            skipped=skipped,
            truncated=truncated,
            uncertain=uncertain,
            real_tokens=real_tokens,
            padded_tokens=padded_tokens,
            model_seconds=model_seconds,
            batch_sizes=[int(n) for n in batch_sizes],
            # JSON object keys are strings; readers turn them back into ints
            token_lengths={str(k): int(v) for k, v in sorted(token_lengths.items())},
            categories={str(k): int(v) for k, v in sorted(categories.items())},
        )
    )


def start_step(conn: sa.Connection, run_id: str, step: str, shard: int, started_at: dt.datetime) -> None:
    """Records a step invocation as running (keyed by run, step, shard and start time)."""
    conn.execute(
        sa.insert(s.inference_steps).values(
            run_id=run_id, step=step, shard=shard, started_at=started_at, status=STEP_RUNNING
        )
    )


def finish_step(
    conn: sa.Connection,
    *,
    run_id: str,
    step: str,
    shard: int,
    started_at: dt.datetime,
    finished_at: dt.datetime,
    status: str,
    error: str | None,
) -> None:
    """Closes the invocation's row (or writes it whole, when its start could not be recorded)."""
    t = s.inference_steps.c
    values = dict(finished_at=finished_at, status=status, error=error[:200] if error else None)
    key = dict(run_id=run_id, step=step, shard=shard, started_at=started_at)
    stmt = insert_for(conn)(s.inference_steps).values(**key, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=[t.run_id, t.step, t.shard, t.started_at], set_=values))


def steps(conn: sa.Connection, run_id: str) -> list[sa.Row]:
    t = s.inference_steps.c
    return list(conn.execute(sa.select(s.inference_steps).where(t.run_id == run_id).order_by(t.started_at, t.step)))


def chunks(conn: sa.Connection, run_ids: Sequence[str], columns: Sequence[str] | None = None) -> list[sa.Row]:
    t = s.inference_chunks.c
    cols = [t[c] for c in columns] if columns else [s.inference_chunks]
    stmt = sa.select(*cols).where(t.run_id.in_(sa.bindparam("ids", expanding=True))).order_by(t.committed_at, t.seq)
    return list(conn.execute(stmt, {"ids": list(run_ids)}))


def shard_progress(conn: sa.Connection, run_id: str, shard: int) -> tuple[int, int]:
    """(tickets of the shard, of which already out of `planned`): where a resumed shard starts."""
    i = s.inference_run_items.c
    stmt = sa.select(
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(sa.case((i.status != s.ITEM_PLANNED, 1), else_=0)), 0),
    ).where(i.run_id == run_id, i.shard == shard)
    total, done = conn.execute(stmt).one()
    return int(total or 0), int(done or 0)


def runs_without_plan(conn: sa.Connection, limit: int) -> list[sa.Row]:
    """Runs some step recorded but that have no run row: they failed before plan recorded them."""
    t, r = s.inference_steps.c, s.inference_runs.c
    stmt = (
        sa.select(
            t.run_id,
            sa.func.min(t.started_at).label("started_at"),
            sa.func.max(t.finished_at).label("finished_at"),
            sa.func.max(t.error).label("error"),
        )
        .select_from(s.inference_steps.outerjoin(s.inference_runs, r.run_id == t.run_id))
        .where(r.run_id.is_(None))
        .group_by(t.run_id)
        .order_by(sa.func.min(t.started_at).desc())
        .limit(limit)
    )
    return list(conn.execute(stmt))


def model_tickets(conn: sa.Connection, run_id: str) -> int:
    """The run's tickets that plan gave to a shard (the model's work; plan skips empty ones as shard -1)."""
    i = s.inference_run_items.c
    return conn.scalar(sa.select(sa.func.count()).where(i.run_id == run_id, i.shard >= 0)) or 0


def processing_intervals(conn: sa.Connection, run_id: str) -> list[tuple[dt.datetime, dt.datetime]]:
    """Per model-task invocation: from when its model was loaded and its first chunk started to its last commit."""
    c = s.inference_chunks.c
    stmt = (
        sa.select(c.step_started_at, sa.func.max(c.committed_at))
        .where(c.run_id == run_id)
        .group_by(c.step, c.shard, c.step_started_at)
    )
    return [(start, end) for start, end in conn.execute(stmt)]


def category_totals(conn: sa.Connection, run_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """run_id -> {label: tickets} over the runs' chunks, added up by the database where it can (PostgreSQL's
    json_each_text, SQLite's json_each), so that many nights of chunks never travel to the client."""
    if not run_ids:
        return {}
    table = {"postgresql": "json_each_text(c.categories)", "sqlite": "json_each(c.categories)"}.get(conn.dialect.name)
    out: dict[str, dict[str, int]] = {run_id: {} for run_id in run_ids}
    if table is None:  # another dialect: add them up here
        for row in chunks(conn, run_ids, ["run_id", "categories"]):
            for label, n in (row.categories or {}).items():
                out[row.run_id][label] = out[row.run_id].get(label, 0) + int(n)
        return out
    # `table` is one of the two fixed strings above; the run IDs are bound
    sql = f"SELECT c.run_id, kv.key, SUM(CAST(kv.value AS INTEGER)) FROM inference_chunks AS c, {table} AS kv "  # noqa: S608
    stmt = sa.text(sql + "WHERE c.run_id IN :ids GROUP BY c.run_id, kv.key").bindparams(
        sa.bindparam("ids", expanding=True)
    )
    for run_id, label, n in conn.execute(stmt, {"ids": list(run_ids)}):
        out[run_id][label] = int(n)
    return out


def output_totals(conn: sa.Connection, run_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """run_id -> (staged, uncertain) over the runs' chunks."""
    c = s.inference_chunks.c
    stmt = (
        sa.select(c.run_id, sa.func.sum(c.staged), sa.func.sum(c.uncertain))
        .where(c.run_id.in_(sa.bindparam("ids", expanding=True)))
        .group_by(c.run_id)
    )
    return {run_id: (int(st or 0), int(un or 0)) for run_id, st, un in conn.execute(stmt, {"ids": list(run_ids)})}
