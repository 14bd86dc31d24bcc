"""Queries over the Batch API bookkeeping (inference_batches, inference_batch_requests).

Like the rest of inference.store, every function takes a connection inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import sqlalchemy as sa

from inference.store import schema as s
from inference.store.batch_tables import PART_COLLECTED, inference_batch_requests, inference_batches
from inference.store.db import id_pages, ids_in

B, R = inference_batches.c, inference_batch_requests.c
INSERT_PAGE = 5000
FILL_PAGE = 1000


def lock_run(conn: sa.Connection, run_id: str) -> None:
    """Serialises the run's part planning (a second copy of the task waits, then sees the first's parts)."""
    conn.execute(sa.select(s.inference_runs.c.run_id).where(s.inference_runs.c.run_id == run_id).with_for_update())


def sendable_items(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[tuple[str, int]]:
    """(ticket_id, attempts so far) of the run's items that wait for a request and are in no open part:
    planned ones, and failed ones whose failure is still pending a retry. In ticket_id order."""
    i, f = s.inference_run_items.c, s.ticket_failures.c
    in_open_part = (
        sa.select(sa.literal(1))
        .select_from(inference_batch_requests.join(inference_batches, sa.and_(B.run_id == R.run_id, B.part == R.part)))
        .where(R.run_id == i.run_id, R.ticket_id == i.ticket_id, B.state != PART_COLLECTED)
        .exists()
    )
    stmt = (
        sa.select(i.ticket_id, i.attempts)
        .select_from(
            s.inference_run_items.outerjoin(
                s.ticket_failures, sa.and_(f.run_id == i.run_id, f.ticket_id == i.ticket_id)
            )
        )
        .where(
            i.run_id == run_id,
            i.ticket_id > after,
            sa.or_(i.status == s.ITEM_PLANNED, sa.and_(i.status == s.ITEM_FAILED, f.status == s.FAILURE_PENDING)),
            ~in_open_part,
        )
        .order_by(i.ticket_id)
        .limit(limit)
    )
    return [(t, n) for t, n in conn.execute(stmt)]


def summaries_to_send(conn: sa.Connection, run_id: str, after: str, limit: int) -> list[sa.Row]:
    """When the encoder computes the other outputs: the run's staged rows still without a summary whose item
    waits for one (staged, or failed with a retry pending) and is in no open part. In ticket_id order, with
    the text the encoder saw (content_hash, source_updated_at), the item's status and how many parts the
    ticket was sent in before (its batch round)."""
    i, f, st = s.inference_run_items.c, s.ticket_failures.c, s.inference_staging.c
    sent_before = (
        sa.select(sa.func.count())
        .where(R.run_id == st.run_id, R.ticket_id == st.ticket_id)
        .correlate(s.inference_staging)
        .scalar_subquery()
    )
    in_open_part = (
        sa.select(sa.literal(1))
        .select_from(inference_batch_requests.join(inference_batches, sa.and_(B.run_id == R.run_id, B.part == R.part)))
        .where(R.run_id == st.run_id, R.ticket_id == st.ticket_id, B.state != PART_COLLECTED)
        .exists()
    )
    stmt = (
        sa.select(st.ticket_id, st.content_hash, st.source_updated_at, i.status, sent_before.label("rounds"))
        .select_from(
            s.inference_staging.join(
                s.inference_run_items, sa.and_(i.run_id == st.run_id, i.ticket_id == st.ticket_id)
            ).outerjoin(s.ticket_failures, sa.and_(f.run_id == st.run_id, f.ticket_id == st.ticket_id))
        )
        .where(
            st.run_id == run_id,
            st.ticket_id > after,
            st.summary.is_(None),
            sa.or_(i.status == s.ITEM_STAGED, sa.and_(i.status == s.ITEM_FAILED, f.status == s.FAILURE_PENDING)),
            ~in_open_part,
        )
        .order_by(st.ticket_id)
        .limit(limit)
    )
    return list(conn.execute(stmt))


def lock_waiting(conn: sa.Connection, run_id: str, ticket_ids: Sequence[str], after_encoder: bool) -> set[str]:
    """Of these items, those still waiting for a summary, locked for this transaction: planned or failed
    (summary only), staged or failed (the summary joins what the encoder staged)."""
    if not after_encoder:
        from inference.store import items

        return items.lock_open_items(conn, run_id, ticket_ids)
    i = s.inference_run_items.c
    waiting: set[str] = set()
    for page in id_pages(conn, ticket_ids):
        stmt = (
            sa.select(i.ticket_id)
            .where(
                i.run_id == run_id,
                ids_in(conn, i.ticket_id),
                i.status.in_([s.ITEM_STAGED, s.ITEM_FAILED]),
            )
            .order_by(i.ticket_id)
            .with_for_update()
        )
        waiting.update(conn.scalars(stmt, {"ids": page}))
    return waiting


def fill_summaries(conn: sa.Connection, run_id: str, replies: Sequence[tuple[str, str, str]]) -> set[str]:
    """(ticket_id, content_hash, summary): fills the summary of the staged row computed from exactly that
    text, where it is still missing. Returns the tickets whose row took it (any other reply never lands)."""
    st = s.inference_staging.c
    expected = {t: digest for t, digest, _ in replies}
    find = sa.select(st.ticket_id, st.content_hash).where(
        st.run_id == run_id, ids_in(conn, st.ticket_id), st.summary.is_(None)
    )
    matching = set()
    for page in id_pages(conn, expected):
        matching.update(t for t, digest in conn.execute(find, {"ids": page}) if expected[t] == digest)
    rows = [(t, summary) for t, _, summary in replies if t in matching]
    if conn.dialect.name != "postgresql":  # SQLite: local, a statement per row costs no round trip
        stmt = (
            sa.update(s.inference_staging)
            .where(st.run_id == run_id, st.ticket_id == sa.bindparam("b_ticket_id"))
            .values(summary=sa.bindparam("b_summary"))
        )
        if rows:
            conn.execute(stmt, [{"b_ticket_id": t, "b_summary": summary} for t, summary in rows])
        return matching
    for k in range(0, len(rows), FILL_PAGE):  # UPDATE .. FROM (VALUES ...): one round trip per page
        values = sa.values(sa.column("ticket_id", st.ticket_id.type), sa.column("summary", st.summary.type), name="v")
        page = values.data(rows[k : k + FILL_PAGE])
        conn.execute(
            sa.update(s.inference_staging)
            .where(st.run_id == run_id, st.ticket_id == page.c.ticket_id)
            .values(summary=page.c.summary)
        )
    return matching


def next_part(conn: sa.Connection, run_id: str) -> int:
    last = conn.scalar(sa.select(sa.func.max(B.part)).where(B.run_id == run_id))
    return 0 if last is None else last + 1


def add_part(conn: sa.Connection, part_row: Mapping, members: Sequence[Mapping]) -> None:
    conn.execute(sa.insert(inference_batches).values(**part_row))
    for k in range(0, len(members), INSERT_PAGE):
        conn.execute(sa.insert(inference_batch_requests), list(members[k : k + INSERT_PAGE]))


def parts(conn: sa.Connection, run_id: str, states: Iterable[str] | None = None) -> list[sa.Row]:
    stmt = sa.select(inference_batches).where(B.run_id == run_id).order_by(B.part)
    if states is not None:
        stmt = stmt.where(B.state.in_(list(states)))
    return list(conn.execute(stmt))


def lock_part(conn: sa.Connection, run_id: str, part: int) -> sa.Row:
    return conn.execute(sa.select(inference_batches).where(B.run_id == run_id, B.part == part).with_for_update()).one()


def update_part(conn: sa.Connection, run_id: str, part: int, *, only_in: str | None = None, **values) -> bool:
    """Updates the part row (only while it is in state `only_in`, when given); True when it did."""
    stmt = sa.update(inference_batches).where(B.run_id == run_id, B.part == part)
    if only_in is not None:
        stmt = stmt.where(B.state == only_in)
    return conn.execute(stmt.values(**values)).rowcount == 1


def members(conn: sa.Connection, run_id: str, part: int) -> list[sa.Row]:
    stmt = sa.select(inference_batch_requests).where(R.run_id == run_id, R.part == part).order_by(R.ticket_id)
    return list(conn.execute(stmt))


def update_members(conn: sa.Connection, run_id: str, part: int, rows: Sequence[Mapping]) -> None:
    """Rewrites what was recorded of these members' text (hash, version time, cut flag, estimate)."""
    if not rows:
        return
    stmt = (
        sa.update(inference_batch_requests)
        .where(R.run_id == run_id, R.part == part, R.ticket_id == sa.bindparam("b_ticket_id"))
        .values(
            content_hash=sa.bindparam("b_content_hash"),
            source_updated_at=sa.bindparam("b_source_updated_at"),
            truncated=sa.bindparam("b_truncated"),
            est_tokens=sa.bindparam("b_est_tokens"),
        )
    )
    conn.execute(stmt, [{f"b_{k}": v for k, v in row.items()} for row in rows])


def drop_members(conn: sa.Connection, run_id: str, part: int, ticket_ids: Iterable[str]) -> None:
    stmt = sa.delete(inference_batch_requests).where(R.run_id == run_id, R.part == part, ids_in(conn, R.ticket_id))
    for page in id_pages(conn, ticket_ids):
        conn.execute(stmt, {"ids": page})


def set_outcomes(conn: sa.Connection, run_id: str, part: int, outcomes: Sequence[Mapping]) -> None:
    """outcomes: {ticket_id, outcome, input_tokens, output_tokens} per member."""
    if not outcomes:
        return
    stmt = (
        sa.update(inference_batch_requests)
        .where(R.run_id == run_id, R.part == part, R.ticket_id == sa.bindparam("b_ticket_id"))
        .values(
            outcome=sa.bindparam("b_outcome"),
            input_tokens=sa.bindparam("b_input_tokens"),
            output_tokens=sa.bindparam("b_output_tokens"),
        )
    )
    conn.execute(stmt, [{f"b_{k}": v for k, v in row.items()} for row in outcomes])


def run_totals(conn: sa.Connection, run_id: str) -> dict[str, int]:
    """Parts, requests sent, token totals, and the distinct tickets that got a reply."""
    row = conn.execute(
        sa.select(
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(B.request_count), 0),
            sa.func.coalesce(sa.func.sum(B.input_tokens), 0),
            sa.func.coalesce(sa.func.sum(B.output_tokens), 0),
            sa.func.coalesce(sa.func.sum(B.ignored_lines), 0),
        ).where(B.run_id == run_id)
    ).one()
    replied = conn.scalar(
        sa.select(sa.func.count(sa.distinct(R.ticket_id))).where(R.run_id == run_id, R.outcome == "result")
    )
    return {
        "parts": row[0],
        "requests": int(row[1]),
        "input_tokens": int(row[2]),
        "output_tokens": int(row[3]),
        "ignored_lines": int(row[4]),
        "tickets_replied": int(replied or 0),
    }
