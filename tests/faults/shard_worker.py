"""infer_shard in a process of its own, as an Airflow worker runs it, for the process-death tests.

usage: python shard_worker.py RUN_ID SHARD   (settings from TICKETS_DB_URL and INFERENCE_* as deployed)

Fault switches (environment), both on the encoder's forward pass:
  FAULT_FORWARD_DELAY  seconds added to every forward pass: stretches the shard so a test can kill it mid-way
  FAULT_KILL_ON_TOKEN  a token id: a forward pass whose batch holds it SIGKILLs this process (a poison ticket
                       that takes the worker down: segfault, OOM killer)
Prints infer_shard's totals as one JSON line and exits 0 when the shard is done.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from inference.config import settings_from_env
from inference.engine.encoder import Encoder
from inference.pipeline import infer_shard


def main() -> int:
    run_id, shard = sys.argv[1], int(sys.argv[2])
    delay = float(os.environ.get("FAULT_FORWARD_DELAY") or 0)
    kill_token = int(os.environ["FAULT_KILL_ON_TOKEN"]) if os.environ.get("FAULT_KILL_ON_TOKEN") else None
    real_forward = Encoder.forward

    def forward(self, batch_ids, *args, **kwargs):
        if kill_token is not None and any(kill_token in seq for seq in batch_ids):
            os.kill(os.getpid(), signal.SIGKILL)
        if delay:
            time.sleep(delay)
        return real_forward(self, batch_ids, *args, **kwargs)

    Encoder.forward = forward
    totals = infer_shard(settings_from_env(), run_id, shard)
    print(json.dumps(totals.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
