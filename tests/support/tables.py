"""Plain reads of the run tables for assertions: functions for one-line checks (reliability), a view of one
PostgreSQL database as Python values (faults), a view of the tickets database a live Airflow writes to
(services), and a snapshot to put a database back exactly where it was."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from inference.store.db import writing
from inference.store.schema import (
    OUR_TABLES,
    inference_run_items,
    inference_runs,
    inference_staging,
    ticket_failures,
    ticket_results,
    tickets,
)
from inference.textprep import content_hash

T0 = dt.datetime(2026, 11, 30, 3, 0, tzinfo=dt.UTC)


def result_row(
    ticket_id: str, *, at: dt.datetime = T0, digest: str = "a" * 64, version: str = "m@1", category="billing"
) -> dict:
    """A complete ticket_results row (a 4-dim unit embedding that follows the digest) for writing directly."""
    import numpy as np

    from inference.heads.embedding import embedding_to_bytes

    vec = np.zeros(4, dtype=np.float32)
    vec[int(digest[0], 16) % 4] = 1.0
    return dict(
        ticket_id=ticket_id,
        model_id="m",
        model_version=version,
        content_hash=digest,
        source_updated_at=at,
        embedding=embedding_to_bytes(vec),
        embedding_dim=4,
        category=category,
        category_score=0.5,
        category_confidence=None,
        category_uncertain=None,
        summary=None,
        truncated=False,
        input_tokens=10,
        run_id="r1",
        created_at=T0,
        updated_at=T0,
    )


# --- one-line reads ------------------------------------------------------------------------------------------


def results(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def source(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}


def items(engine: sa.Engine, run_id: str | None = None) -> dict[str, sa.Row]:
    stmt = sa.select(inference_run_items)
    if run_id is not None:
        stmt = stmt.where(inference_run_items.c.run_id == run_id)
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(stmt)}


def failures(engine: sa.Engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(ticket_failures).order_by(ticket_failures.c.ticket_id)))


def count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return conn.scalar(sa.select(sa.func.count()).select_from(table))


def written_anything(engine: sa.Engine) -> dict[str, int]:
    """Row counts of every table the pipeline writes (all zero means: nothing was written)."""
    tables = (inference_runs, inference_run_items, inference_staging, ticket_results, ticket_failures)
    return {t.name: count(engine, t) for t in tables}


# --- one database as plain values ---------------------------------------------------------------------------


class DbView:
    """What is in the run tables, as plain Python values."""

    TIMESTAMPS = ("created_at", "updated_at")

    def __init__(self, engine):
        self.engine = engine

    def _rows(self, table, *where, order=None):
        stmt = sa.select(table).where(*where)
        if order is not None:
            stmt = stmt.order_by(order)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def items(self, run_id: str) -> dict[str, tuple[str, str | None, int]]:
        """ticket_id -> (status, reason, attempts)."""
        items = inference_run_items
        rows = self._rows(items, items.c.run_id == run_id)
        return {r["ticket_id"]: (r["status"], r["reason"], r["attempts"]) for r in rows}

    def statuses(self, run_id: str) -> dict[str, str]:
        return {k: v[0] for k, v in self.items(run_id).items()}

    def item_counts(self, run_id: str) -> dict[str, int]:
        """status -> count, plus 'in_flight': planned items a process has claimed (attempts > 0)."""
        i = inference_run_items.c
        in_flight = sa.and_(i.status == "planned", i.attempts > 0)
        stmt = sa.select(i.status, in_flight, sa.func.count()).where(i.run_id == run_id).group_by(i.status, in_flight)
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for status, flying, n in conn.execute(stmt):
                out[status] = out.get(status, 0) + n
                if flying:
                    out["in_flight"] = n
        return out

    def staging(self, run_id: str) -> dict[str, dict]:
        st = inference_staging
        return {r["ticket_id"]: r for r in self._rows(st, st.c.run_id == run_id)}

    def staging_order(self, run_id: str) -> list[str]:
        """Staged ticket IDs in the order load_results pages them."""
        st = inference_staging
        return [r["ticket_id"] for r in self._rows(st, st.c.run_id == run_id, order=st.c.ticket_id)]

    def results(self) -> dict[str, dict]:
        """ticket_id -> result row without its write timestamps (which differ between equal runs)."""
        return {
            r["ticket_id"]: {k: v for k, v in r.items() if k not in self.TIMESTAMPS} for r in self._rows(ticket_results)
        }

    def failures(self) -> list[dict]:
        return [
            {k: v for k, v in r.items() if k not in (*self.TIMESTAMPS, "id")}
            for r in self._rows(ticket_failures, order=ticket_failures.c.id)
        ]

    def source_hashes(self) -> dict[str, str]:
        return {str(r["ticket_id"]): content_hash(r["subject"], r["body"]) for r in self._rows(tickets)}

    def final_state(self, run_id: str) -> dict:
        return {
            "results": self.results(),
            "items": self.items(run_id),
            "staging": sorted(self.staging(run_id)),
            "failures": self.failures(),
        }

    def forget_results(self) -> None:
        """Deletes every result and failure, so the same tickets are backlog again (a second, fresh run)."""
        with writing(self.engine) as conn:
            conn.execute(sa.delete(ticket_results))
            conn.execute(sa.delete(ticket_failures))


class Snapshot:
    """Every row of our tables (not the source), to put a run back exactly where it was."""

    def __init__(self, engine):
        self.engine = engine
        with engine.connect() as conn:
            self.rows = {t: [dict(r._mapping) for r in conn.execute(t.select())] for t in OUR_TABLES}

    def restore(self) -> None:
        with writing(self.engine) as conn:
            for table, rows in self.rows.items():
                conn.execute(table.delete())
                if rows:
                    conn.execute(table.insert(), rows)


def committed_pages(view: DbView, run_id: str, order: list[str], page: int) -> int:
    """Checks that load_results left the run all-or-nothing per page; returns how many pages committed.

    `order` is the staged IDs in load order before the load. Every item is either succeeded, with its
    result row (written by this run) and no staging row left, or still staged, with its staging row and
    no result row; and the succeeded ones are whole pages from the front.
    """
    items, results, staging = view.statuses(run_id), view.results(), set(view.staging(run_id))
    for ticket_id in order:
        if items[ticket_id] == "succeeded":
            assert ticket_id in results, f"{ticket_id} succeeded without a result row"
            assert results[ticket_id]["run_id"] == run_id
            assert ticket_id not in staging, f"{ticket_id} succeeded but is still staged"
        else:
            assert items[ticket_id] == "staged", f"{ticket_id} is {items[ticket_id]}"
            assert ticket_id not in results, f"{ticket_id} has a result but its item is still staged"
            assert ticket_id in staging, f"{ticket_id} left staging without succeeding"
    assert set(results) <= set(order)
    done = [t for t in order if items[t] == "succeeded"]
    assert done == order[: len(done)], "pages commit in order"
    assert len(done) % page == 0 or len(done) == len(order), f"a partial page committed: {len(done)} of {page}"
    assert view.failures() == []
    return -(-len(done) // page)


# --- the tickets database of a live Airflow --------------------------------------------------------------------


class TicketsView:
    """Plain reads of the tickets database (the source and our tables) that a running Airflow writes to."""

    def __init__(self, engine):
        self.engine = engine

    def window_tickets(self, start: dt.datetime, end: dt.datetime) -> dict[str, tuple[str | None, str | None]]:
        """ticket_id -> (subject, body) of the tickets created or updated in [start, end), as the source reads."""
        c = tickets.c
        in_window = sa.or_(
            sa.and_(c.created_at >= start, c.created_at < end), sa.and_(c.updated_at >= start, c.updated_at < end)
        )
        with self.engine.connect() as conn:
            return {str(r.ticket_id): (r.subject, r.body) for r in conn.execute(sa.select(tickets).where(in_window))}

    def non_empty(self, rows: dict[str, tuple[str | None, str | None]]) -> set[str]:
        return {tid for tid, (subject, body) in rows.items() if (subject or "").strip() or (body or "").strip()}

    def results(self, ticket_ids=None) -> list:
        r = ticket_results
        stmt = sa.select(r.c.ticket_id, r.c.run_id, r.c.updated_at, r.c.content_hash, r.c.model_version)
        if ticket_ids is not None:
            stmt = stmt.where(r.c.ticket_id.in_(sorted(ticket_ids)))
        with self.engine.connect() as conn:
            return list(conn.execute(stmt))

    def run_row(self, run_id: str):
        with self.engine.connect() as conn:
            return conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == run_id)).first()

    def runs(self, run_ids) -> dict:
        r = inference_runs
        with self.engine.connect() as conn:
            return {row.run_id: row for row in conn.execute(sa.select(r).where(r.c.run_id.in_(sorted(run_ids))))}

    def items(self, run_id: str) -> dict[str, tuple[str, str | None, int]]:
        """ticket_id -> (status, reason, attempts)"""
        i = inference_run_items
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(i.c.ticket_id, i.c.status, i.c.reason, i.c.attempts).where(i.c.run_id == run_id)
            )
            return {r.ticket_id: (r.status, r.reason, r.attempts) for r in rows}

    def ticket_text_contains(self, needle: str) -> int:
        t = tickets
        with self.engine.connect() as conn:
            stmt = sa.select(sa.func.count()).where(sa.or_(t.c.subject.contains(needle), t.c.body.contains(needle)))
            return conn.scalar(stmt)

    def item_counts(self, run_id: str) -> dict[str, int]:
        i = inference_run_items
        stmt = sa.select(i.c.status, sa.func.count()).where(i.c.run_id == run_id).group_by(i.c.status)
        with self.engine.connect() as conn:
            return dict(conn.execute(stmt).all())

    def failures(self, run_id: str) -> list:
        f = ticket_failures
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(f).where(f.c.run_id == run_id)))
