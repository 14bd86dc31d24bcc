"""Progress lines and their ETA on a real run (issue 15): N tickets on PostgreSQL, the real model, the CLI.

    .venv/bin/python benchmarks/progress_eta.py                        # 20,000 tickets, default settings
    .venv/bin/python benchmarks/progress_eta.py --tickets 2000 --env INFERENCE_CHUNK_SIZE=256

Seeds N tickets (`python -m inference seed`) into a scratch PostgreSQL database (dropped afterwards), runs
`python -m inference run` on them as an operator would, and reads its log: per shard, how many progress lines
there were against committed chunks, and at the first line at or past half the shard, the ETA it printed against
the time the rest of the shard then actually took (until its last progress line). The log's own timestamps are the
clock. The run's summary line and the timings go to stdout (and --json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = "2026-11-30"
LINE = re.compile(
    r"^(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO inference: run \S+ infer_shard shard (?P<shard>\d+): "
    r"(?P<done>[\d,]+)/(?P<total>[\d,]+) tickets .*\| ETA (?P<eta>\S+)$"
)
START = re.compile(
    r"infer_shard shard (?P<shard>\d+): model .* chunks of (?P<chunk>[\d,]+) tickets, (?P<total>[\d,]+) "
)


def seconds(eta: str) -> float:
    """'1h02m', '3m05s', '42s' -> seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", eta)
    if not m or eta in ("", "-"):
        raise ValueError(f"no ETA in {eta!r}")
    h, mi, s = (int(x or 0) for x in m.groups())
    return h * 3600 + mi * 60 + s


def analyse(log: str) -> list[dict]:
    shards: dict[int, dict] = {}
    for raw in log.splitlines():
        if start := START.search(raw):
            shards.setdefault(int(start["shard"]), {"lines": []})["chunk"] = int(start["chunk"].replace(",", ""))
        m = LINE.match(raw)
        if not m:
            continue
        when = dt.datetime.strptime(m["when"], "%Y-%m-%d %H:%M:%S,%f")
        shards.setdefault(int(m["shard"]), {"lines": []})["lines"].append(
            (when, int(m["done"].replace(",", "")), int(m["total"].replace(",", "")), m["eta"])
        )
    out = []
    for shard, info in sorted(shards.items()):
        lines = info["lines"]
        total = lines[-1][2]
        half = next(line for line in lines if line[1] >= total / 2)
        actual = (lines[-1][0] - half[0]).total_seconds()
        eta = seconds(half[3])
        out.append(
            {
                "shard": shard,
                "tickets": total,
                "chunk_size": info.get("chunk"),
                "progress_lines": len(lines),
                "chunks": -(-total // info["chunk"]) if info.get("chunk") else None,
                "halfway_line": f"{half[1]:,}/{total:,}",
                "eta_printed_s": eta,
                "remaining_actual_s": round(actual, 1),
                "error": round((eta - actual) / actual, 3) if actual else None,
                "shard_seconds": round((lines[-1][0] - lines[0][0]).total_seconds(), 1),
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tickets", type=int, default=20_000)
    p.add_argument("--pg-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", help="admin URL")
    p.add_argument("--env", action="append", default=[], help="VAR=value for the run (repeatable)")
    p.add_argument("--log", help="also keep the run's log here")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()

    from inference.bench.scratchdb import scratch_database

    env = {**os.environ, "INFERENCE_DEVICE": os.environ.get("INFERENCE_DEVICE", "cpu")}
    env.update(dict(item.split("=", 1) for item in args.env))
    cli = [sys.executable, "-m", "inference"]
    with scratch_database(args.pg_url, "progress_eta") as url:
        subprocess.run(
            [*cli, "--db", url, "seed", "--tickets", str(args.tickets), "--date", DAY],
            check=True,
            env=env,
            cwd=ROOT,
            capture_output=True,
        )
        started = dt.datetime.now()
        run = subprocess.run(
            [*cli, "--db", url, "run", "--date", DAY], env=env, cwd=ROOT, capture_output=True, text=True
        )
        took = (dt.datetime.now() - started).total_seconds()
        report = subprocess.run(
            [*cli, "--db", url, "report", "--format", "text"], env=env, cwd=ROOT, capture_output=True, text=True
        )
    if args.log:
        Path(args.log).write_text(run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"the run failed ({run.returncode}):\n{run.stderr[-3000:]}")
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    shards = analyse(run.stderr)
    result = {"tickets": args.tickets, "run_seconds": round(took, 1), "shards": shards, "summary": summary}
    print(json.dumps(result, indent=2))
    print()
    print("| shard | tickets | chunks | progress lines | at | ETA printed | actually left | error |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for s in shards:
        print(
            f"| {s['shard']} | {s['tickets']:,} | {s['chunks']} | {s['progress_lines']} | {s['halfway_line']} | "
            f"{s['eta_printed_s']:.0f} s | {s['remaining_actual_s']:.1f} s | {s['error']:+.1%} |"
        )
    print()
    print(report.stdout)
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "report": report.stdout}, indent=2))


if __name__ == "__main__":
    main()
