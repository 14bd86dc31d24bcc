# ruff: noqa: S608 - the SQL here is constant text (generated benchmark rows), values are bound
"""What retention costs a night (inference/store/retention.py), on PostgreSQL and SQLite.

The tables hold `--nights` finished runs of `--items` run items each (plus 1% resolved failures and 0.1%
dead-letters per run); the oldest `--expired` nights are past INFERENCE_RETENTION_DAYS. Measured: the
housekeeping a run's finish_run does (abandoned runs + retention), once with `--expired` nights to delete
(the first night retention is switched on, or after a pause) and once with nothing left to delete (every
other night's finish). Rows are generated in SQL (generate_series / a recursive CTE), not through Python.

    python benchmarks/retention_bench.py [--nights 30] [--items 50000] [--expired 1] [--pg-url URL] [--sqlite-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from inference.bench.scratchdb import scratch_database
from inference.store import retention
from inference.store.db import make_engine, utcnow, writing
from inference.store.schema import create_schema

RETENTION_DAYS = 90


def fill(engine: sa.Engine, nights: int, items: int, expired: int) -> None:
    """Runs `bench-0001`.. planned one per day; the `expired` oldest are older than RETENTION_DAYS."""
    now = utcnow()
    pg = engine.dialect.name == "postgresql"
    with writing(engine) as conn:
        for n in range(nights):
            run_id = f"bench-{n:04d}"
            age_days = RETENTION_DAYS + expired - n if n < expired else (nights - n)
            planned = now - dt.timedelta(days=age_days, hours=1)
            conn.execute(
                sa.text(
                    "INSERT INTO inference_runs (run_id, window_start, window_end, model_version, status, options, "
                    "backlog, succeeded, failed, skipped, shards, real_tokens, padded_tokens, device_seconds, "
                    "planned_at, finished_at) VALUES (:r, :p, :p, 'm@1', 'succeeded', '{}', :i, :i, 0, 0, 1, 0, 0, 0, :p, :p)"
                ),
                {"r": run_id, "p": planned if pg else planned.replace(tzinfo=None).isoformat(" "), "i": items},
            )
        if pg:
            series = "generate_series(1, :items) AS g(i)"
            runs_sql = "SELECT run_id FROM inference_runs WHERE run_id LIKE 'bench-%'"
            conn.execute(
                sa.text(
                    "INSERT INTO inference_run_items (run_id, ticket_id, shard, est_tokens, content_hash, status, attempts) "
                    f"SELECT r.run_id, lpad(g.i::text, 9, '0'), 0, 57, md5(g.i::text), 'succeeded', 1 FROM ({runs_sql}) r, {series}"
                ),
                {"items": items},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO ticket_failures (run_id, ticket_id, attempt, content_hash, model_version, error_class, "
                    "retryable, status, message, created_at, updated_at) "
                    "SELECT r.run_id, lpad(g.i::text, 9, '0'), 1, md5(g.i::text), 'm@1', 'model_error', true, "
                    "CASE WHEN g.i % 1000 = 0 THEN 'dead_letter' ELSE 'resolved' END, 'fixed text', now(), now() "
                    f"FROM ({runs_sql}) r, {series} WHERE g.i % 100 = 0"
                ),
                {"items": items},
            )
        else:
            seq = "WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < :items) "
            runs_sql = "(SELECT run_id FROM inference_runs WHERE run_id LIKE 'bench-%') r"
            conn.execute(
                sa.text(
                    seq
                    + "INSERT INTO inference_run_items (run_id, ticket_id, shard, est_tokens, content_hash, status, attempts) "
                    f"SELECT r.run_id, printf('%09d', seq.i), 0, 57, hex(seq.i), 'succeeded', 1 FROM {runs_sql}, seq"
                ),
                {"items": items},
            )
            conn.execute(
                sa.text(
                    seq + "INSERT INTO ticket_failures (run_id, ticket_id, attempt, content_hash, model_version, "
                    "error_class, retryable, status, message, created_at, updated_at) "
                    "SELECT r.run_id, printf('%09d', seq.i), 1, hex(seq.i), 'm@1', 'model_error', 1, "
                    "CASE WHEN seq.i % 1000 = 0 THEN 'dead_letter' ELSE 'resolved' END, 'fixed text', "
                    f"datetime('now'), datetime('now') FROM {runs_sql}, seq WHERE seq.i % 100 = 0"
                ),
                {"items": items},
            )
    if pg:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")


def measure(engine: sa.Engine, nights: int, items: int, expired: int) -> dict:
    started = time.perf_counter()
    fill(engine, nights, items, expired)
    fill_s = time.perf_counter() - started
    first = retention.housekeeping(engine, retention_days=RETENTION_DAYS, abandoned_after_hours=48)
    steady = retention.housekeeping(engine, retention_days=RETENTION_DAYS, abandoned_after_hours=48)
    deleted = first.rows_deleted.get("inference_run_items", 0)
    return {
        "dialect": engine.dialect.name,
        "rows_before": nights * items,
        "fill_seconds": round(fill_s, 1),
        "expired_nights": expired,
        "item_rows_deleted": deleted,
        "failure_rows_deleted": first.rows_deleted.get("ticket_failures", 0),
        "runs_deleted": first.runs_deleted,
        "runs_kept_for_open_failures": first.runs_kept_for_open_failures,
        "seconds": first.seconds,
        "item_rows_per_second": round(deleted / first.seconds) if first.seconds else None,
        "nothing_to_delete_seconds": steady.seconds,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nights", type=int, default=30)
    p.add_argument("--items", type=int, default=50_000, help="run items per night (tickets per night)")
    p.add_argument("--expired", type=int, default=1, help="nights past retention")
    p.add_argument(
        "--pg-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", help="admin URL; '' skips"
    )
    p.add_argument("--sqlite-dir", default=None, help="where the SQLite file goes (default: a temporary directory)")
    args = p.parse_args()
    out = []
    with tempfile.TemporaryDirectory(dir=args.sqlite_dir) as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'retention.db'}")
        create_schema(engine)
        out.append(measure(engine, args.nights, args.items, args.expired))
        engine.dispose()
    if args.pg_url:
        with scratch_database(args.pg_url, "bench_retention") as url:
            engine = make_engine(url)
            create_schema(engine)
            out.append(measure(engine, args.nights, args.items, args.expired))
            engine.dispose()
    for row in out:
        print(json.dumps(row, sort_keys=True))


if __name__ == "__main__":
    main()
