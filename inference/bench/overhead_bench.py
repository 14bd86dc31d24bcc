"""The whole run on PostgreSQL with an engine that costs (almost) nothing: what the pipeline itself costs.

Each step runs as its own fresh process, as Airflow runs each task (plan_run, infer_shard per shard, up to
`parallel` at once, load_results, has_retries, retry_failed when it has work, finish_run with its
housekeeping and retention), so each step's peak RSS is its own (VmHWM). Every `fail_every`-th ticket
fails once in infer_shard, so the retry branch runs and recovers them.

tickets_per_s = tickets / the wall time from plan_run's start to finish_run's exit, process starts included.
machine_cpu_seconds: the CPU time every process on the machine (the steps and a local PostgreSQL) used meanwhile
(/proc/stat), and cpu_us_per_ticket that over the tickets: what the pipeline costs, less noisy than wall time.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import sqlalchemy as sa

from inference.bench.rss import run_step, start_step, wait_step
from inference.bench.scratchdb import create_database, database_exists, drop_database, scratch_database
from inference.bench.seeding import seed_mix
from inference.store import migrate
from inference.store.db import make_engine
from inference.window import window_for_date

DATE = dt.date(2026, 11, 30)
SEED_VERSION = 2  # bump when the seeded tickets or their table's state change (older kept templates are not reused)


def _summary(rows: list[dict]) -> dict:
    """One step's numbers; for several processes (shards), the slowest's wall and the highest peak."""
    return {
        "processes": len(rows),
        "seconds": round(max(r["process_seconds"] for r in rows), 2),
        "step_seconds": round(sum(r["seconds"] for r in rows), 2),
        "peak_rss_mib": max(r["peak_rss_mib"] for r in rows),
    }


def whole_run(url: str, run_id: str, engine: str, shards: int, parallel: int, fail_every: int, log) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    steps: dict[str, list[dict]] = {}

    def step(name: str, *args: str) -> dict:
        log(f"overhead: {name}")
        out = run_step(name, url, run_id, *args, env=env)
        steps.setdefault(name, []).append(out)
        return out

    busy_before = machine_busy_seconds()
    started = time.perf_counter()
    plan = step("plan_run", "--date", DATE.isoformat(), "--shards", str(shards))
    t_infer = time.perf_counter()
    pending, running = list(range(plan["result"]["shards"])), []
    log(f"overhead: {len(pending)} infer_shard processes, {parallel} at once")
    while pending or running:
        while pending and len(running) < parallel:
            k = pending.pop(0)
            args = ("--shard", str(k), "--engine", engine, "--fail-every", str(fail_every))
            running.append(start_step("infer_shard", url, run_id, *args, env=env))
        steps.setdefault("infer_shard", []).append(wait_step("infer_shard", running.pop(0)))
    infer_wall = time.perf_counter() - t_infer
    step("load_results")
    if step("has_retries")["result"]["retries"]:
        step("retry_failed", "--engine", engine)
    finish = step("finish_run")
    seconds = time.perf_counter() - started
    busy = machine_busy_seconds()
    cpu = round(busy - busy_before, 1) if busy is not None and busy_before is not None else None
    summaries = {name: _summary(rows) for name, rows in steps.items()}
    summaries["infer_shard"]["seconds"] = round(infer_wall, 2)
    backlog = finish["result"]["backlog"] or 0
    return {
        "run": finish["result"],
        "seconds": round(seconds, 2),
        "tickets_per_s": round(backlog / seconds, 1) if seconds else None,
        "machine_cpu_seconds": cpu,
        "cpu_us_per_ticket": round(cpu * 1e6 / backlog, 1) if cpu and backlog else None,
        "steps": summaries,
    }


def machine_busy_seconds() -> float | None:
    """CPU seconds this machine's cores have been busy since boot (user, nice, system, irq, softirq: every
    process, the database server included; not idle, I/O wait or time stolen by a hypervisor), from
    /proc/stat; None where there is none. Less sensitive than wall time to a shared machine's neighbours."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def seeded_template(pg_url: str, tickets: int, log) -> str:
    """A database holding only the seeded source tickets, kept on the server for later runs (--keep-seed):
    each run starts from a copy of it (CREATE DATABASE .. TEMPLATE), so a million tickets are seeded once."""
    name = f"inference_bench_seed_{tickets}_v{SEED_VERSION}"
    if not database_exists(pg_url, name):
        url = create_database(pg_url, name)
        db = make_engine(url)
        try:
            seed_mix(db, tickets, window_for_date(DATE))
        except BaseException:
            db.dispose()
            drop_database(pg_url, name)
            raise
        db.dispose()
        log(f"overhead: seeded {tickets} tickets into {name} (kept for later runs; DROP DATABASE to remove it)")
    return name


def overhead(
    pg_url: str,
    tickets: int,
    *,
    engine: str = "instant",
    shards: int = 4,
    parallel: int = 2,
    fail_every: int = 1000,
    keep_seed: bool = False,
    log=lambda msg: None,
) -> dict:
    t0 = time.perf_counter()
    template = seeded_template(pg_url, tickets, log) if keep_seed else None
    with scratch_database(pg_url, "inference_bench_overhead", template) as url:
        db = make_engine(url)
        try:
            if template is None:
                seed_mix(db, tickets, window_for_date(DATE))
            else:  # a template kept from an older release holds our tables at its revision: this copy migrates
                migrate.upgrade(db)
            seeding = time.perf_counter() - t0
            log(f"overhead: {tickets} source tickets ready in {seeding:.0f}s")
            out = whole_run(url, "bench-overhead", engine, shards, parallel, fail_every, log)
            with db.connect() as conn:
                size = conn.scalar(sa.text("SELECT pg_database_size(current_database())"))
        finally:
            db.dispose()
    return {
        "tickets": tickets,
        "engine": engine,
        "shards": shards,
        "parallel": parallel,
        "fail_every": fail_every,
        "writer": os.environ.get("INFERENCE_WRITER") or "thread",  # what the step processes read (INFERENCE_WRITER)
        **out,
        "seed_seconds": round(seeding, 1),
        "database_mib": round(size / 2**20, 1),
    }
