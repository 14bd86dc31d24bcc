#!/usr/bin/env bash
# Peak RSS (VmHWM) of infer_shard processes, two at once, by shard size, with the default malloc and with
# MALLOC_ARENA_MAX=2 (BENCHMARKS.md, "Pipeline overhead", runs of 2026-12-05). Needs the template that
#   python -m inference bench --part overhead --tickets N --keep-seed
# keeps (inference_bench_seed_N_v2), and a PostgreSQL superuser URL in PG (default: 127.0.0.1, postgres).
#   benchmarks/shard_memory.sh 1000000 [swap]     # swap: MALLOC_ARENA_MAX=2 pair first
set -euo pipefail
N=${1:?tickets of a kept template, e.g. 100000 or 1000000}
ORDER=${2:-}
PY=${PYTHON:-.venv/bin/python}
ADMIN=${PG_ADMIN:-postgresql://postgres@127.0.0.1:5432/postgres}
DB=inference_bench_shardmem_$N
URL=${ADMIN%/*}/$DB
URL=postgresql+psycopg2://${URL#postgresql://}
psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB TEMPLATE inference_bench_seed_${N}_v2"
trap 'psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB"' EXIT
"$PY" -m inference --db "$URL" db upgrade >/dev/null 2>&1
"$PY" -m inference.bench.step_child plan_run --db "$URL" --run-id shardmem --date 2026-11-30 --shards 4 2>/dev/null | tail -1
shard() {  # shard number, label
    "$PY" -m inference.bench.step_child infer_shard --db "$URL" --run-id shardmem --shard "$1" --engine instant \
        --fail-every 1000 2>/dev/null | tail -1 |
        "$PY" -c "import json, sys; d = json.loads(sys.stdin.read()); print('shard $1 $2', d['peak_rss_mib'], 'MiB', d['seconds'], 's')"
}
default_pair() { shard "$1" default & shard "$2" default & wait; }
arena_pair() { MALLOC_ARENA_MAX=2 shard "$1" arena2 & MALLOC_ARENA_MAX=2 shard "$2" arena2 & wait; }
if [ "$ORDER" = swap ]; then arena_pair 0 1; default_pair 2 3; else default_pair 0 1; arena_pair 2 3; fi
