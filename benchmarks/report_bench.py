"""How long the run report takes, and how much memory, for a run of N items (issue 15: 1M items in under 10 s, with
memory that does not grow with N).

    .venv/bin/python benchmarks/report_bench.py                       # 100,000 and 1,000,000 items on PostgreSQL
    .venv/bin/python benchmarks/report_bench.py --items 1000000 --sqlite

Each size gets a scratch database (dropped afterwards) holding what a real run of that size leaves in the run
tables: N run items (succeeded, with 0.1% failed and 0.5% skipped with reasons), their failures, one metrics row
per committed chunk of 2,048 (achieved batch sizes, token-length and category histograms) for the run and for 30
earlier nights of the same size, and its step rows. Then a fresh process builds the report (`inference.report.build`)
and renders it as HTML, three times; the best wall time counts (and the process's own CPU time, which other load on
the machine does not inflate), with the process's peak RSS (ru_maxrss) and the peak of Python allocations during
the build (tracemalloc, which numpy and pandas report to).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = 2048
NIGHTS = 30
LABELS = ("billing", "account_access", "technical_issue", "feature_request", "shipping", "cancellation")
RUN_ID = "bench__report"
DAY0 = dt.datetime(2026, 10, 1, 2, tzinfo=dt.UTC)


def fill(url: str, items: int, seed: int = 3) -> None:
    """The run tables of a run of `items` tickets and of NIGHTS earlier nights like it."""
    import sqlalchemy as sa

    from inference.store import metrics
    from inference.store.db import make_engine, writing
    from inference.store.schema import create_schema, inference_runs, inference_steps

    rng = random.Random(seed)
    engine = make_engine(url)
    create_schema(engine)
    chunks = -(-items // CHUNK)
    runs = [(f"bench__night_{k:02d}", DAY0 + dt.timedelta(days=k)) for k in range(NIGHTS)] + [
        (RUN_ID, DAY0 + dt.timedelta(days=NIGHTS))
    ]
    with writing(engine) as conn:
        for run_id, start in runs:
            finished = start + dt.timedelta(days=1, hours=1)
            conn.execute(
                sa.insert(inference_runs).values(
                    run_id=run_id,
                    window_start=start,
                    window_end=start + dt.timedelta(days=1),
                    model_version="v",
                    status="succeeded",
                    options={},
                    backlog=items,
                    succeeded=items,
                    shards=8,
                    real_tokens=items * 56,
                    padded_tokens=items * 57,
                    device_seconds=items / 60,
                    planned_at=start + dt.timedelta(days=1),
                    finished_at=finished,
                )
            )
            shift = 0.1 if run_id == RUN_ID else 0.0  # this night: more billing (a drift to find)
            weights = [1 + shift * 10 if label == "billing" else 1 for label in LABELS]
            for k in range(chunks):
                n = min(CHUNK, items - k * CHUNK)
                sizes, left = [], n
                while left > 0:
                    size = min(left, rng.choice((8, 12, 16, 18, 24, 32, 48)))
                    sizes.append(size)
                    left -= size
                lengths: dict[int, int] = {}
                for _ in range(60):
                    length = min(256, int(rng.lognormvariate(3.8, 0.5)))
                    lengths[length] = lengths.get(length, 0) + n // 60
                jitter = [w * rng.uniform(0.95, 1.05) for w in weights]
                cats = {label: int(n * w / sum(jitter)) for label, w in zip(LABELS, jitter, strict=True)}
                metrics.add_chunk(
                    conn,
                    run_id=run_id,
                    step="infer_shard",
                    shard=k % 8,
                    step_started_at=start + dt.timedelta(days=1, minutes=k % 8),
                    seq=k // 8 + 1,
                    committed_at=start + dt.timedelta(days=1, minutes=10, seconds=k * 4),
                    tickets=n,
                    staged=n,
                    failed=0,
                    skipped=0,
                    truncated=n // 50,
                    uncertain=n // 9,
                    real_tokens=n * 56,
                    padded_tokens=n * 57,
                    model_seconds=n / 65,
                    batch_sizes=sizes,
                    token_lengths=lengths,
                    categories=cats,
                )
        for step, shard, minutes in [
            ("plan_run", -1, 2),
            *[("infer_shard", k, 40) for k in range(8)],
            ("load_results", -1, 5),
            ("finish_run", -1, 1),
        ]:
            started = DAY0 + dt.timedelta(days=NIGHTS + 1, minutes=shard + 1)
            conn.execute(
                sa.insert(inference_steps).values(
                    run_id=RUN_ID,
                    step=step,
                    shard=shard,
                    started_at=started,
                    finished_at=started + dt.timedelta(minutes=minutes),
                    status="succeeded",
                )
            )
    # The run's items and failures, generated by the server (a million rows go in in seconds).
    with writing(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text("""
                INSERT INTO inference_run_items (run_id, ticket_id, shard, est_tokens, content_hash, status, reason,
                                                 attempts)
                SELECT :run, g::text, g % 8, 56, md5(g::text) || md5(g::text),
                       CASE WHEN g % 1000 = 0 THEN 'failed' WHEN g % 200 = 0 THEN 'skipped' ELSE 'succeeded' END,
                       CASE WHEN g % 1000 = 0 THEN 'model_error' WHEN g % 200 = 0 THEN 'empty_input' END, 1
                FROM generate_series(1, :n) AS g"""),
                {"run": RUN_ID, "n": items},
            )
            conn.execute(
                sa.text("""
                INSERT INTO ticket_failures (run_id, ticket_id, attempt, content_hash, model_version, error_class,
                                             retryable, status, message, created_at, updated_at)
                SELECT :run, g::text, 3, md5(g::text) || md5(g::text), 'v', 'model_error', true, 'dead_letter',
                       'model raised on this item alone', now(), now()
                FROM generate_series(1000, :n, 1000) AS g"""),
                {"run": RUN_ID, "n": items},
            )
        else:
            conn.execute(
                sa.text("""
                WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < :n)
                INSERT INTO inference_run_items (run_id, ticket_id, shard, est_tokens, content_hash, status, reason,
                                                 attempts)
                SELECT :run, CAST(x AS TEXT), x % 8, 56, printf('%064d', x),
                       CASE WHEN x % 1000 = 0 THEN 'failed' WHEN x % 200 = 0 THEN 'skipped' ELSE 'succeeded' END,
                       CASE WHEN x % 1000 = 0 THEN 'model_error' WHEN x % 200 = 0 THEN 'empty_input' END, 1
                FROM g"""),
                {"run": RUN_ID, "n": items},
            )
            conn.execute(
                sa.text("""
                WITH RECURSIVE g(x) AS (SELECT 1000 UNION ALL SELECT x + 1000 FROM g WHERE x + 1000 <= :n)
                INSERT INTO ticket_failures (run_id, ticket_id, attempt, content_hash, model_version, error_class,
                                             retryable, status, message, created_at, updated_at)
                SELECT :run, CAST(x AS TEXT), 3, printf('%064d', x), 'v', 'model_error', 1, 'dead_letter',
                       'model raised on this item alone', datetime('now'), datetime('now')
                FROM g"""),
                {"run": RUN_ID, "n": items},
            )
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("ANALYZE"))
    engine.dispose()


CHILD = """
import json, resource, sys, time, tracemalloc
sys.path.insert(0, {root!r})
from inference.report import build, render
from inference.store.db import make_engine
engine = make_engine({url!r})
best, cpu, size, peak = None, None, 0, 0
for attempt in range(3):
    tracemalloc.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    report = build(engine, {run!r}, price_per_device_hour=2.5, max_batch_size=256)
    html = render(report, "html")
    took, cpu_took = time.perf_counter() - started, time.process_time() - cpu_started
    peak = max(peak, tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    best = took if best is None else min(best, took)
    cpu = cpu_took if cpu is None else min(cpu, cpu_took)
    size = len(html)
print(json.dumps({{"seconds": round(best, 3), "cpu_seconds": round(cpu, 3), "html_bytes": size, "tracemalloc_peak_mib": round(peak / 2**20, 1),
                  "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "backlog": report["counts"]["backlog"], "chunks": report["chunks"]["chunks"],
                  "batches": report["batch_sizes"]["batches"], "drift": report["categories"]["drift"]["flagged"]}}))
"""


def measure(url: str) -> dict:
    code = CHILD.format(root=str(ROOT), url=url, run=RUN_ID)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the report process failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def database(args, items: int):
    if args.sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/report.db"
        return
    from inference.bench.scratchdb import scratch_database

    with scratch_database(args.pg_url, f"report_bench_{items}") as url:
        yield url


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, action="append", help="run sizes (default: 100000 and 1000000)")
    p.add_argument("--pg-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", help="admin URL")
    p.add_argument("--sqlite", action="store_true", help="a SQLite file instead of PostgreSQL")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    results = []
    for items in args.items or [100_000, 1_000_000]:
        with database(args, items) as url:
            started = time.perf_counter()
            fill(url, items)
            filled = time.perf_counter() - started
            result = {
                "items": items,
                "database": "sqlite" if args.sqlite else "postgresql",
                "fill_seconds": round(filled, 1),
                **measure(url),
            }
        results.append(result)
        print(json.dumps(result), flush=True)
    print()
    print(
        "| items | database | report (build + HTML), best of 3 | its CPU time | peak RSS of the process | "
        "tracemalloc peak |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['items']:,} | {r['database']} | {r['seconds']:.2f} s | {r['cpu_seconds']:.2f} s | "
            f"{r['max_rss_mib']:.0f} MiB | {r['tracemalloc_peak_mib']:.1f} MiB |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
