"""Writing results: row-by-row executemany against our bulk upsert, same rows, same server."""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import sqlalchemy as sa

from inference.store.db import writing
from inference.store.results import upsert_results
from inference.store.schema import ticket_results


def result_rows(n: int, dim: int = 384, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = dt.datetime.now(dt.UTC)
    return [
        dict(
            ticket_id=f"{i:010d}",
            model_id="bench",
            model_version="bench@1",
            content_hash=f"{i:064x}",
            source_updated_at=now,
            embedding=vectors[i].tobytes(),
            embedding_dim=dim,
            category="billing",
            category_score=0.5,
            category_confidence=0.9,
            category_uncertain=False,
            summary=f"Ticket {i} asks for a refund of a duplicate charge on the last invoice.",
            truncated=False,
            input_tokens=42,
            run_id="bench",
            created_at=now,
            updated_at=now,
        )
        for i in range(n)
    ]


def _truncate(engine: sa.Engine) -> None:
    with writing(engine) as conn:
        conn.execute(sa.text("TRUNCATE ticket_results"))


def rowwise(engine: sa.Engine, rows: list[dict]) -> float:
    """psycopg2 `executemany`: one INSERT .. ON CONFLICT round trip per row (the naive baseline)."""
    import psycopg2

    _truncate(engine)
    from sqlalchemy.dialects import postgresql

    stmt = postgresql.insert(ticket_results)
    stmt = stmt.on_conflict_do_update(  # the same update as ours: every column but the key
        index_elements=["ticket_id"],
        set_={c.name: stmt.excluded[c.name] for c in ticket_results.columns if c.name != "ticket_id"},
        where=ticket_results.c.source_updated_at < stmt.excluded.source_updated_at,
    )
    sql = str(stmt.compile(dialect=postgresql.psycopg2.dialect()))  # pyformat: %(name)s, values bound
    params = [{**r, "embedding": psycopg2.Binary(r["embedding"])} for r in rows]
    raw = engine.raw_connection()
    try:
        started = time.perf_counter()
        cursor = raw.cursor()
        cursor.executemany(sql, params)
        raw.commit()
        return len(rows) / (time.perf_counter() - started)
    finally:
        raw.close()


def ours(engine: sa.Engine, rows: list[dict], chunk: int) -> float:
    """upsert_results per chunk, one transaction each, exactly as load_results calls it."""
    _truncate(engine)
    started = time.perf_counter()
    for k in range(0, len(rows), chunk):
        with writing(engine) as conn:
            upsert_results(conn, rows[k : k + chunk])
    return len(rows) / (time.perf_counter() - started)


def write_rates(engine: sa.Engine, n: int, chunk: int) -> dict:
    rows = result_rows(n)
    baseline = rowwise(engine, rows[: min(n, 5000)])  # the slow one on a subset: a rate is a rate
    bulk = ours(engine, rows, chunk)
    _truncate(engine)
    return {
        "rows": n,
        "dim": 384,
        "rowwise_executemany_rows_per_s": round(baseline, 1),
        "ours_copy_merge_rows_per_s": round(bulk, 1),
        "ratio": round(bulk / baseline, 2),
    }
