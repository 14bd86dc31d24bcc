"""Where model tasks run. Read when the DAG file is parsed: environment only (no database, no network).

INFERENCE_GPU_QUEUE: the Celery queue GPU workers listen on (LocalExecutor ignores queues).
INFERENCE_GPU_POOL: the Airflow pool whose slots equal the number of GPUs.
INFERENCE_RUN_DEADLINE_MINUTES: alert when a run is not finished this long after it was queued.
  Default 0 (off): Airflow 3.3's dag.test() / `airflow dags test` crash at the end of a successful run of
  a DAG that has a DeadlineAlert (DagRun.update_state looks the alert up by an ID it does not have), so
  deployments switch it on (docker-compose.yml: 360) and local test runs leave it off.
"""

from __future__ import annotations

import os

GPU_QUEUE = os.environ.get("INFERENCE_GPU_QUEUE") or "gpu"
GPU_POOL = os.environ.get("INFERENCE_GPU_POOL") or "gpu"

try:
    RUN_DEADLINE_MINUTES = max(0, int(os.environ.get("INFERENCE_RUN_DEADLINE_MINUTES") or 0))
except ValueError:
    RUN_DEADLINE_MINUTES = 0
