"""Housekeeping of our bookkeeping tables: runs nobody will finish, and rows kept past their retention.

Two jobs, both applied by every run's `finish_run` (after its own accounting) and by
`python -m inference retention`:

- **Abandoned runs.** A run still `planned` or `running` INFERENCE_ABANDONED_AFTER_HOURS after it was planned
  (its tasks died, the database was full, nobody cleared them) is marked `failed` with the reason; its staged
  rows are deleted and its `staged` items go back to `planned`, so that if someone does clear its tasks later
  they recompute those tickets instead of waiting for rows that are gone. Nothing of `ticket_results` changes.
- **Retention.** Finished runs planned more than INFERENCE_RETENTION_DAYS ago lose their items, staging,
  per-chunk and per-step rows, Batch API bookkeeping and *resolved* failures, then their run row. Open
  failures (pending, dead-lettered) are kept until a result resolves them (they stop a dead-lettered text from
  being retried every night), and so is the run row they point to. Results are never deleted.

Work goes run page by run page, each page one short transaction, so a night's deletion never holds locks long.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass, field

import sqlalchemy as sa

from inference.store import schema as s
from inference.store.db import utcnow, writing

log = logging.getLogger("inference")

RUN_PAGE = 20  # runs per transaction (a night of 50,000 tickets is 50,000 item rows per run)
ACTIVE = ("planned", "running")
# Tables keyed by run whose rows are the run's own bookkeeping (ticket_results.run_id only says which run
# wrote a result: results are kept; ticket_failures are deleted only once resolved).
KEPT = {s.ticket_results.name, s.ticket_failures.name, s.inference_runs.name}


@dataclass
class Housekeeping:
    abandoned: list[str] = field(default_factory=list)
    staging_removed: int = 0
    items_replanned: int = 0
    runs_deleted: int = 0
    runs_kept_for_open_failures: int = 0
    rows_deleted: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def abandon_dead_runs(
    engine: sa.Engine, *, after_hours: int, now: dt.datetime | None = None, by: str | None = None
) -> Housekeeping:
    """Marks runs still planned/running after `after_hours` failed; their staging goes, staged items re-plan."""
    now = now or utcnow()
    cutoff = now - dt.timedelta(hours=after_hours)
    r, st, i = s.inference_runs.c, s.inference_staging.c, s.inference_run_items.c
    out = Housekeeping()
    with engine.connect() as conn:
        dead = list(
            conn.scalars(sa.select(r.run_id).where(r.status.in_(ACTIVE), r.planned_at < cutoff).order_by(r.run_id))
        )
    dead = [run_id for run_id in dead if run_id != by]
    for k in range(0, len(dead), RUN_PAGE):
        page = dead[k : k + RUN_PAGE]
        with writing(engine) as conn:
            # Re-checked under the write lock: a run that moved on meanwhile is left alone.
            still = list(
                conn.scalars(
                    sa.select(r.run_id)
                    .where(r.run_id.in_(page), r.status.in_(ACTIVE), r.planned_at < cutoff)
                    .with_for_update()
                )
            )
            if not still:
                continue
            out.staging_removed += conn.execute(sa.delete(s.inference_staging).where(st.run_id.in_(still))).rowcount
            out.items_replanned += conn.execute(
                sa.update(s.inference_run_items)
                .where(i.run_id.in_(still), i.status == s.ITEM_STAGED)
                .values(status=s.ITEM_PLANNED, reason=None)
            ).rowcount
            error = (
                f"abandoned: still unfinished {after_hours} h after planning (its tasks died or were never "
                f"cleared); marked failed{f' by run {by}' if by else ''}, staged rows removed"
            )
            conn.execute(
                sa.update(s.inference_runs)
                .where(r.run_id.in_(still))
                .values(status="failed", finished_at=now, error=error[:500])
            )
            out.abandoned.extend(still)
    if out.abandoned:
        log.warning(
            "marked %d abandoned run(s) failed (%s); removed %d staged rows, %d items planned again",
            len(out.abandoned),
            ", ".join(out.abandoned[:10]) + (" ..." if len(out.abandoned) > 10 else ""),
            out.staging_removed,
            out.items_replanned,
        )
    return out


def _run_tables(engine: sa.Engine) -> list[sa.Table]:
    """Our tables keyed by run_id that exist in this database, children first."""
    present = set(sa.inspect(engine).get_table_names())
    return [
        t
        for t in reversed(s.metadata.sorted_tables)
        if "run_id" in t.c and t.name not in KEPT and t.name in present and t.schema is None
    ]


def apply_retention(
    engine: sa.Engine, *, days: int, now: dt.datetime | None = None, dry_run: bool = False
) -> Housekeeping:
    """Deletes the bookkeeping of finished runs planned more than `days` ago (0: keeps everything)."""
    out = Housekeeping()
    if days <= 0:
        return out
    now = now or utcnow()
    cutoff = now - dt.timedelta(days=days)
    r, f = s.inference_runs.c, s.ticket_failures.c
    with engine.connect() as conn:
        old = list(
            conn.scalars(sa.select(r.run_id).where(r.status.not_in(ACTIVE), r.planned_at < cutoff).order_by(r.run_id))
        )
    tables = _run_tables(engine)
    for k in range(0, len(old), RUN_PAGE):
        page = old[k : k + RUN_PAGE]
        with engine.connect() if dry_run else writing(engine) as conn:
            counts: dict[str, int] = {}
            for table in tables:
                stmt = sa.delete(table).where(table.c.run_id.in_(page))
                counts[table.name] = _count(conn, table, page) if dry_run else conn.execute(stmt).rowcount
            resolved = sa.and_(f.run_id.in_(page), f.status == s.FAILURE_RESOLVED)
            counts[s.ticket_failures.name] = (
                conn.scalar(sa.select(sa.func.count()).where(resolved)) or 0
                if dry_run
                else conn.execute(sa.delete(s.ticket_failures).where(resolved)).rowcount
            )
            open_runs = set(conn.scalars(sa.select(f.run_id).where(f.run_id.in_(page)).distinct()))
            if dry_run:  # resolved rows would be gone: only open ones keep a run row
                open_runs = set(
                    conn.scalars(
                        sa.select(f.run_id).where(f.run_id.in_(page), f.status != s.FAILURE_RESOLVED).distinct()
                    )
                )
            gone = [run_id for run_id in page if run_id not in open_runs]
            if gone and not dry_run:
                conn.execute(sa.delete(s.inference_runs).where(r.run_id.in_(gone)))
        for name, n in counts.items():
            out.rows_deleted[name] = out.rows_deleted.get(name, 0) + n
        out.runs_deleted += len(gone)
        out.runs_kept_for_open_failures += len(page) - len(gone)
    if out.runs_deleted or any(out.rows_deleted.values()):
        log.info(
            "retention (%d days)%s: %d runs deleted (%d kept for open failures), rows %s",
            days,
            " [dry run]" if dry_run else "",
            out.runs_deleted,
            out.runs_kept_for_open_failures,
            out.rows_deleted,
        )
    return out


def _count(conn: sa.Connection, table: sa.Table, run_ids: list[str]) -> int:
    return conn.scalar(sa.select(sa.func.count()).select_from(table).where(table.c.run_id.in_(run_ids))) or 0


def housekeeping(
    engine: sa.Engine, *, retention_days: int, abandoned_after_hours: int, by: str | None = None
) -> Housekeeping:
    """Both jobs: abandoned runs first (so that they too age into retention), then retention."""
    import time

    started = time.perf_counter()
    now = utcnow()
    dead = abandon_dead_runs(engine, after_hours=abandoned_after_hours, now=now, by=by)
    kept = apply_retention(engine, days=retention_days, now=now)
    kept.abandoned, kept.staging_removed, kept.items_replanned = (
        dead.abandoned,
        dead.staging_removed,
        dead.items_replanned,
    )
    kept.seconds = round(time.perf_counter() - started, 3)
    return kept
