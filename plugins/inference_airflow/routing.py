"""Where model tasks run. Read when the DAG file is parsed: environment only (no database, no network).

INFERENCE_GPU_QUEUE: the Celery queue GPU workers listen on (LocalExecutor ignores queues).
INFERENCE_GPU_POOL: the Airflow pool whose slots equal the number of GPUs.
"""

from __future__ import annotations

import os

GPU_QUEUE = os.environ.get("INFERENCE_GPU_QUEUE") or "gpu"
GPU_POOL = os.environ.get("INFERENCE_GPU_POOL") or "gpu"
