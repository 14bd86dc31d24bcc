"""Staging: outputs of infer_shard waiting for load_results, keyed by (run, ticket)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from inference import heads
from inference.records import StagedResult
from inference.store import schema as s
from inference.store.bulk import copy_into_temp
from inference.store.db import id_pages, ids_in, insert_for


def stage(conn: sa.Connection, results: Sequence[StagedResult]) -> None:
    """Keyed by (run, ticket): a second copy of the same shard adds nothing."""
    if not results:
        return
    rows = [r.to_row() for r in results]
    stmt = insert_for(conn)(s.inference_staging)
    if conn.dialect.name == "postgresql":
        twin = copy_into_temp(conn, s.inference_staging, rows)
        columns = [c.name for c in s.inference_staging.columns]
        stmt = stmt.from_select(columns, sa.select(*[twin.c[n] for n in columns]).order_by(twin.c.ticket_id))
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", "ticket_id"]))
    else:
        conn.execute(stmt.on_conflict_do_nothing(index_elements=["run_id", "ticket_id"]), list(rows))


def staged_page(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[StagedResult]:
    """The next page of the run's staged results (ticket_id order), with every head's output columns."""
    st = s.inference_staging.c
    stmt = (
        sa.select(s.inference_staging)
        .where(st.run_id == run_id, st.ticket_id > after)
        .order_by(st.ticket_id)
        .limit(limit)
    )
    return _results(conn, stmt)


def staged_ids(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[str]:
    """The next page of the run's staged ticket IDs (ticket_id order)."""
    st = s.inference_staging.c
    stmt = (
        sa.select(st.ticket_id)
        .where(st.run_id == run_id, st.ticket_id > after)
        .order_by(st.run_id, st.ticket_id)
        .limit(limit)
    )
    return list(conn.scalars(stmt))


def staged_rows(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str]) -> list[StagedResult]:
    """The run's staged results of these tickets (ticket_id order), locked FOR UPDATE (PostgreSQL)."""
    st = s.inference_staging.c
    stmt = (
        sa.select(s.inference_staging)
        .where(st.run_id == run_id, ids_in(conn, st.ticket_id))
        .order_by(st.run_id, st.ticket_id)
        .with_for_update()
    )
    out: list[StagedResult] = []
    for page in id_pages(conn, ticket_ids):
        out.extend(_results(conn, stmt, {"ids": page}))
    return out


def _results(conn: sa.Connection, stmt, params: dict | None = None) -> list[StagedResult]:
    outputs = tuple(c.name for c in heads.output_columns())
    return [StagedResult.from_row(row._mapping, outputs) for row in conn.execute(stmt, params or {})]


def unstage(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str]) -> None:
    st = s.inference_staging.c
    stmt = sa.delete(s.inference_staging).where(st.run_id == run_id, ids_in(conn, st.ticket_id))
    for page in id_pages(conn, ticket_ids):
        conn.execute(stmt, {"ids": page})


def staged_without_item(conn: sa.Connection, run_id: str) -> int:
    """Staged rows of the run whose ticket has no item in it: must be zero (load_results never writes them)."""
    st, i = s.inference_staging.c, s.inference_run_items.c
    stmt = (
        sa.select(sa.func.count())
        .select_from(
            s.inference_staging.outerjoin(
                s.inference_run_items, sa.and_(i.run_id == st.run_id, i.ticket_id == st.ticket_id)
            )
        )
        .where(st.run_id == run_id, i.ticket_id.is_(None))
    )
    return conn.scalar(stmt) or 0
