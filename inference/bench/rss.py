"""Peak memory of one step, measured in a process that did nothing else.

`ru_maxrss` is inherited across fork (a child forked from a big parent reports the parent's peak), so the
peak is read from /proc/self/status `VmHWM` of a freshly exec'd interpreter: `python -m
inference.bench.step_child`, started by `run_step`, runs one step and prints what it measured.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from inference.procmem import peak_rss_mib  # noqa: F401 - the steps' measure, re-exported


def children_cpu_seconds() -> float:
    """CPU time (user + system) of this process's children it has waited for (a writer process)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_step(step: str, db_url: str, run_id: str, *args: str, env: dict | None = None) -> dict:
    """Runs `step` in a fresh interpreter (python -m inference.bench.step_child); returns its JSON line
    plus `process_seconds`, the child's whole life (interpreter start, imports, the step, exit)."""
    return wait_step(step, start_step(step, db_url, run_id, *args, env=env))


def start_step(
    step: str, db_url: str, run_id: str, *args: str, env: dict | None = None
) -> tuple[subprocess.Popen, float]:
    """`run_step` without waiting (shards side by side); finish with `wait_step`."""
    command = [sys.executable, "-m", "inference.bench.step_child", step, "--db", db_url, "--run-id", run_id, *args]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or dict(os.environ)
    )
    return proc, time.perf_counter()


def wait_step(step: str, started: tuple[subprocess.Popen, float]) -> dict:
    proc, t0 = started
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"bench step {step} failed (exit {proc.returncode}):\n{err[-4000:]}")
    return {**json.loads(out.strip().splitlines()[-1]), "process_seconds": round(seconds, 2)}
