"""Loading results on PostgreSQL, for new results and for updates of existing ones (384-dim embeddings and
every configured head's outputs, staged by infer_shard with the instant engine, inference.bench.instant):

- `load_results`: the catch-all step as a whole (read the staged rows back, validate every output, upsert,
  settle the items, resolve failures, unstage, then the retraction sweep), alone in a fresh process, after
  an infer_shard that only staged (`--stage-only`);
- `in_shard`: loading inside infer_shard, as the DAG runs it (each chunk's outputs validated and upserted from
  memory in the transaction that settles its items, never staged). Three rates, strictest first:
  `shard_rows_per_s` = rows / the whole shard's time (reading the text, claiming, the instant engine and
  loading: everything); `commit_rows_per_s` = rows / the time spent in the shard's chunk transactions (lock
  the items, read the source again, validate every output, upsert, settle the items, resolve failures, the
  chunk's metrics row); `rows_per_s` = rows / the time the shard takes over the same shard only staging its
  outputs for load_results; `cpu_us_per_row` = the shard process's CPU time (every thread, not the database
  server's) per row: steadier than the rates on a machine whose speed drifts;
- `in_shard_serial`: the same with the shard reading, running and committing one chunk after another on one
  thread (`--serial`, benchmark only): `commit_rows_per_s` is then the chunk transactions' rate with nothing
  of the shard's competing with them for the cores and the GIL (as on a machine with a core to spare for the
  writer), where `in_shard` has the shard's reading beside them on this machine's cores;
- `in_shard_process`: `in_shard` with the chunk transactions in a writer process of their own
  (`INFERENCE_WRITER=process`: their own GIL and connection); `cpu_us_per_row` then includes the writer's CPU
  (its start, and pickling each chunk across).

Updates: every ticket is edited (new text, later updated_at) and a second run loads new results over the
existing rows.
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


def _infer(url: str, run_id: str, env: dict, *flags: str) -> dict:
    run_step("plan_run", url, run_id, "--date", DATE.isoformat(), "--shards", "1", env=env)
    return run_step("infer_shard", url, run_id, "--shard", "0", "--engine", "instant", *flags, env=env)


def _staged_then_loaded(url: str, run_id: str, env: dict) -> dict:
    staged = _infer(url, run_id, env, "--stage-only")
    load = run_step("load_results", url, run_id, env=env)
    rows = load["result"]["written"] + load["result"]["unchanged"]
    return {
        "rows": rows,
        "written": load["result"]["written"],
        "seconds": load["seconds"],
        "rows_per_s": round(rows / load["seconds"], 1) if load["seconds"] else None,
        "peak_rss_mib": load["peak_rss_mib"],
        "infer_stage_only_seconds": staged["seconds"],
    }


def _in_shard(url: str, run_id: str, env: dict, stage_only_seconds: float, *flags: str) -> dict:
    shard = _infer(url, run_id, env, *flags)
    rows = shard["result"]["loaded"]
    extra = shard["seconds"] - stage_only_seconds
    return {
        "rows": rows,
        "shard_rows_per_s": round(rows / shard["seconds"], 1) if shard["seconds"] else None,
        "commit_rows_per_s": round(rows / commits, 1) if (commits := shard["result"]["commit_seconds"]) else None,
        "commit_seconds": commits,
        "infer_seconds": shard["seconds"],
        "infer_stage_only_seconds": stage_only_seconds,
        "rows_per_s": round(rows / extra, 1) if extra > 0 else None,
        "cpu_us_per_row": round(1e6 * shard["cpu_seconds"] / rows, 1) if rows else None,
        "peak_rss_mib": shard["peak_rss_mib"],
        "writer_peak_rss_mib": shard["result"]["writer_peak_rss_mib"],  # the writer process's own, if there was one
    }


def _edit_all(engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE tickets SET body = body || ' (edited)', updated_at = updated_at + interval '1 s'"))
        conn.execute(sa.text("ANALYZE"))


def load_rates(pg_url: str, tickets: int, log=lambda msg: None) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    out: dict = {"tickets": tickets}
    for way in ("load_results", "in_shard", "in_shard_serial", "in_shard_process"):
        with scratch_database(pg_url, "inference_bench_load") as url:
            engine = make_engine(url)
            try:
                seed_mix(engine, tickets, window_for_date(DATE))
                for mode in ("new", "update"):
                    if mode == "update":
                        _edit_all(engine)
                    log(f"load: {tickets} {mode} results, {way}")
                    run_id = f"bench-load-{mode}"
                    if way == "load_results":
                        out.setdefault(way, {})[mode] = _staged_then_loaded(url, run_id, env)
                    else:
                        base = out["load_results"][mode]["infer_stage_only_seconds"]
                        flags = ("--serial",) if way == "in_shard_serial" else ()
                        writer = "process" if way == "in_shard_process" else "thread"
                        way_env = {**env, "INFERENCE_WRITER": writer}
                        out.setdefault(way, {})[mode] = _in_shard(url, run_id, way_env, base, *flags)
            finally:
                engine.dispose()
    return out
