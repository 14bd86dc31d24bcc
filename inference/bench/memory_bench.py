"""Peak RSS of each step, each in a fresh process that ran only that step (VmHWM, see inference.bench.rss):
plan_run, infer_shard (one shard holding the whole backlog), load_results and finish_run, for shards of
several sizes and for huge tickets. Flat means: the peak does not grow with the shard or with the tickets'
size beyond a bounded window.
"""

from __future__ import annotations

import datetime as dt
import os

from inference.bench.rss import run_step
from inference.bench.scratchdb import scratch_database
from inference.bench.seeding import copy_tickets, huge_tickets, seed_mix
from inference.store.db import make_engine
from inference.window import window_for_date

DATE = dt.date(2026, 11, 30)
STEPS = ("plan_run", "infer_shard", "load_results", "finish_run")


def _steps(url: str, run_id: str, engine: str, env: dict) -> dict:
    out = {}
    out["plan_run"] = run_step("plan_run", url, run_id, "--date", DATE.isoformat(), "--shards", "1", env=env)
    out["infer_shard"] = run_step("infer_shard", url, run_id, "--shard", "0", "--engine", engine, env=env)
    out["load_results"] = run_step("load_results", url, run_id, env=env)
    out["finish_run"] = run_step("finish_run", url, run_id, env=env)
    return {
        "staged": out["infer_shard"]["result"]["staged"],
        "peak_rss_mib": {k: v["peak_rss_mib"] for k, v in out.items()},
        "seconds": {k: v["seconds"] for k, v in out.items()},
    }


def peak_rss(pg_url: str, tickets: int, engine: str, env: dict, huge_bytes: int = 0) -> dict:
    """One shard of `tickets` tickets (the demo mix, or all of `huge_bytes` characters each)."""
    with scratch_database(pg_url, "inference_bench_mem") as url:
        db = make_engine(url)
        try:
            if huge_bytes:
                copy_tickets(db, huge_tickets(tickets, huge_bytes), window_for_date(DATE))
            else:
                seed_mix(db, tickets, window_for_date(DATE), seed=3)
        finally:
            db.dispose()
        found = _steps(url, f"bench-memory-{tickets}", engine, env)
    return {"tickets": tickets, "ticket_bytes": huge_bytes or None, "engine": engine, **found}


def memory(pg_url: str, sizes, huge, huge_bytes: int, engine: str, env_overrides: dict, log) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", **env_overrides}
    out = {"engine": engine, "env": env_overrides, "shards": [], "huge": []}
    for n in sizes:
        log(f"memory: a {n}-ticket shard ({engine})")
        out["shards"].append(peak_rss(pg_url, n, engine, env))
    for n in huge:
        log(f"memory: {n} tickets of {huge_bytes:,} characters ({engine})")
        out["huge"].append(peak_rss(pg_url, n, engine, {**os.environ, "TOKENIZERS_PARALLELISM": "false"}, huge_bytes))
    return out
