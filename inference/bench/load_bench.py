"""load_results as a whole (read the staged rows back, validate every output, upsert, settle the items,
resolve failures, unstage) on PostgreSQL, for new results and for updates of existing ones.

The rows are staged by infer_shard with the instant engine (inference.bench.instant), exactly as a real
run stages them (384-dim embeddings, every configured head's outputs); then load_results runs alone in a
fresh process and is timed. Updates: every ticket is edited (new text, later updated_at) and a second run
stages and loads new results over the existing rows.
"""

from __future__ import annotations

import datetime as dt
import os

import sqlalchemy as sa

from inference.bench.rss import run_step
from inference.bench.scratchdb import scratch_database
from inference.bench.seeding import seed_mix
from inference.store.db import make_engine
from inference.window import window_for_date

DATE = dt.date(2026, 11, 30)


def _staged_then_loaded(url: str, run_id: str, env: dict) -> dict:
    plan = run_step("plan_run", url, run_id, "--date", DATE.isoformat(), "--shards", "1", env=env)
    for k in range(plan["result"]["shards"]):
        run_step("infer_shard", url, run_id, "--shard", str(k), "--engine", "instant", env=env)
    load = run_step("load_results", url, run_id, env=env)
    rows = load["result"]["written"] + load["result"]["unchanged"]
    return {
        "rows": rows,
        "written": load["result"]["written"],
        "seconds": load["seconds"],
        "rows_per_s": round(rows / load["seconds"], 1) if load["seconds"] else None,
        "peak_rss_mib": load["peak_rss_mib"],
    }


def load_rates(pg_url: str, tickets: int, log=lambda msg: None) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    with scratch_database(pg_url, "inference_bench_load") as url:
        engine = make_engine(url)
        try:
            seed_mix(engine, tickets, window_for_date(DATE))
            log(f"load: {tickets} new results")
            new = _staged_then_loaded(url, "bench-load-new", env)
            with engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE tickets SET body = body || ' (edited)', updated_at = updated_at + interval '1 s'")
                )
                conn.execute(sa.text("ANALYZE"))
            log(f"load: {tickets} updated results")
            update = _staged_then_loaded(url, "bench-load-update", env)
        finally:
            engine.dispose()
    return {"tickets": tickets, "new": new, "update": update}
