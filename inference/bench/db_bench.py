"""Writing results: our bulk upsert against psycopg2 `execute_values` and against one statement per row,
for new rows (INSERT) and for rows that already exist (the ON CONFLICT DO UPDATE path), same rows, same
statement semantics (update every column but the key, only where the incoming row is newer), same server,
one transaction per chunk for every path."""

from __future__ import annotations

import datetime as dt
import time

import numpy as np
import sqlalchemy as sa

from inference.store.db import writing
from inference.store.results import UPDATED_ON_CONFLICT, upsert_results
from inference.store.schema import ticket_results

COLUMNS = [c.name for c in ticket_results.columns]
_NEWER = (
    "ticket_results.source_updated_at < EXCLUDED.source_updated_at OR "
    "(ticket_results.source_updated_at = EXCLUDED.source_updated_at AND "
    "(ticket_results.content_hash <> EXCLUDED.content_hash OR ticket_results.model_version <> EXCLUDED.model_version))"
)
_SET = ", ".join(f"{n} = EXCLUDED.{n}" for n in UPDATED_ON_CONFLICT)
# Column names from our own table, no input: the VALUES part is filled in per path.
UPSERT_SQL = f"INSERT INTO ticket_results ({', '.join(COLUMNS)}) VALUES {{values}} ON CONFLICT (ticket_id) DO UPDATE SET {_SET} WHERE {_NEWER}"  # noqa: S608, E501


def result_rows(n: int, dim: int = 384, seed: int = 0, version_at: dt.datetime | None = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = dt.datetime.now(dt.UTC)
    version_at = version_at or now
    return [
        dict(
            ticket_id=f"{i:010d}",
            model_id="bench",
            model_version="bench@1",
            content_hash=f"{i + seed:064x}",
            source_updated_at=version_at,
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


def _reset(engine: sa.Engine, existing: list[dict] | None, chunk: int) -> None:
    """Empty table (inserts), or the same tickets at an older version (updates), then VACUUM ANALYZE."""
    with writing(engine) as conn:
        conn.execute(sa.text("TRUNCATE ticket_results"))
    for k in range(0, len(existing or []), chunk):
        with writing(engine) as conn:
            upsert_results(conn, existing[k : k + chunk])
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE ticket_results"))


def _tuples(rows: list[dict]) -> list[tuple]:
    import psycopg2

    return [tuple(psycopg2.Binary(r[c]) if c == "embedding" else r[c] for c in COLUMNS) for r in rows]


def _raw_timed(engine: sa.Engine, rows: list[dict], chunk: int, write) -> float:
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        started = time.perf_counter()
        for k in range(0, len(rows), chunk):
            write(cursor, _tuples(sorted(rows[k : k + chunk], key=lambda r: r["ticket_id"])))
            raw.commit()
        return len(rows) / (time.perf_counter() - started)
    finally:
        raw.close()


def rowwise(engine: sa.Engine, rows: list[dict], chunk: int) -> float:
    """psycopg2 `executemany`: one INSERT .. ON CONFLICT round trip per row (the naive baseline)."""
    sql = UPSERT_SQL.format(values="(" + ", ".join(["%s"] * len(COLUMNS)) + ")")
    return _raw_timed(engine, rows, chunk, lambda cur, params: cur.executemany(sql, params))


def execute_values(engine: sa.Engine, rows: list[dict], chunk: int, page_size: int) -> float:
    """psycopg2.extras.execute_values: multi-row VALUES statements of `page_size` rows (the usual fast path)."""
    from psycopg2.extras import execute_values as ev

    sql = UPSERT_SQL.format(values="%s")
    return _raw_timed(engine, rows, chunk, lambda cur, params: ev(cur, sql, params, page_size=page_size))


def ours(engine: sa.Engine, rows: list[dict], chunk: int) -> float:
    """upsert_results per chunk, one transaction each, exactly as the pipeline calls it."""
    started = time.perf_counter()
    for k in range(0, len(rows), chunk):
        with writing(engine) as conn:
            upsert_results(conn, rows[k : k + chunk])
    return len(rows) / (time.perf_counter() - started)


def write_rates(engine: sa.Engine, n: int, chunk: int, rowwise_rows: int = 5000, page_sizes=(100, 1000)) -> dict:
    """rows/s of every path, for inserts and for updates of existing rows; the slow row-by-row path on the
    first `rowwise_rows` rows only (a rate is a rate)."""
    old = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    new = result_rows(n, seed=1)
    out: dict = {"rows": n, "dim": 384, "chunk": chunk}
    for mode, existing in (("insert", None), ("update", result_rows(n, seed=0, version_at=old))):
        rates = {}
        _reset(engine, existing, chunk)
        rates["rowwise_executemany"] = rowwise(engine, new[:rowwise_rows], chunk)
        for size in page_sizes:
            _reset(engine, existing, chunk)
            rates[f"execute_values_page_{size}"] = execute_values(engine, new, chunk, size)
        _reset(engine, existing, chunk)
        rates["ours_copy_merge"] = ours(engine, new, chunk)
        best_ev = max(v for k, v in rates.items() if k.startswith("execute_values"))
        out[mode] = {
            **{f"{k}_rows_per_s": round(v, 1) for k, v in rates.items()},
            "ours_over_rowwise": round(rates["ours_copy_merge"] / rates["rowwise_executemany"], 2),
            "ours_over_best_execute_values": round(rates["ours_copy_merge"] / best_ev, 2),
        }
    _reset(engine, None, chunk)
    return out
