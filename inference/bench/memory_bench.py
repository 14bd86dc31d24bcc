"""Peak RSS of one infer_shard process against its shard size: the child runs infer_shard only, so
its peak is the inference task's own (the parent seeds and plans).

python -m inference.bench.memory_bench --db URL --run-id R --shard 0   prints {"peak_rss_mib": ...}
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

from inference.config import Settings, settings_from_env
from inference.options import RunOptions
from inference.pipeline import plan_run
from inference.seed import seed_backlog
from inference.store.db import make_engine
from inference.window import Window


def child() -> None:
    from inference.pipeline import infer_shard

    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--shard", type=int, default=0)
    args = p.parse_args()
    totals = infer_shard(settings_from_env(db_url=args.db), args.run_id, args.shard)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"staged": totals.staged, "peak_rss_mib": round(peak_kib / 1024, 1)}))


def peak_rss(db_url: str, tickets: int, window: Window, settings: Settings, env: dict) -> dict:
    engine = make_engine(db_url)
    try:
        seed_backlog(engine, tickets, [window], seed=3)
    finally:
        engine.dispose()
    run_id = f"bench-memory-{tickets}"
    plan_run(settings.replace(db_url=db_url), run_id, window, RunOptions(shards=1))
    proc = subprocess.run(
        [sys.executable, "-m", "inference.bench.memory_bench", "--db", db_url, "--run-id", run_id],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return {"tickets": tickets, **json.loads(proc.stdout.strip().splitlines()[-1])}


if __name__ == "__main__":
    child()
