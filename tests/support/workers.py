"""infer_shard in a process of its own, started the way an Airflow worker runs it, that a test can SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


class ShardWorkers:
    """Starts `script` (python SCRIPT RUN_ID SHARD) with the settings as the environment variables a
    deployment sets, and fault switches as FAULT_*; logs go to `log_dir`. `stop()` SIGKILLs the leftovers."""

    def __init__(self, script: Path, log_dir: Path):
        self.script, self.log_dir = script, log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, settings, run_id: str, shard: int, **faults) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENCE_", "TICKETS_", "FAULT_"))}
        env.update(
            TICKETS_DB_URL=settings.db_url,
            INFERENCE_DEVICE=settings.device,
            INFERENCE_CHUNK_SIZE=str(settings.chunk_size),
            INFERENCE_MAX_ATTEMPTS=str(settings.max_attempts),
            INFERENCE_WRITER=settings.writer,
            PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            **{f"FAULT_{k.upper()}": str(v) for k, v in faults.items()},
        )
        if getattr(settings, "heads", None):  # part of the model version: the worker must match the plan
            env["INFERENCE_HEADS"] = ",".join(settings.heads)
        log = self.log_dir / f"worker-{len(self.procs)}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, str(self.script), run_id, str(shard)], cwd=ROOT, env=env, stdout=out, stderr=out
            )
        proc.log = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)


def worker_log(proc) -> str:
    return proc.log.read_text()[-3000:]
