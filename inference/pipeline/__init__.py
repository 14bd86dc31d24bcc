"""The steps the DAG and the CLI call: plan_run, infer_shard, load_results, has_retries, retry_failed,
finish_run (the DAG's task IDs are the same names).

Exports are lazy: plan, load and finish run on CPU workers and must not pay for importing torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "finish_run": "inference.pipeline.finish_step",
    "infer_shard": "inference.pipeline.infer_step",
    "retry_failed": "inference.pipeline.infer_step",
    "load_results": "inference.pipeline.load_step",
    "has_retries": "inference.pipeline.load_step",
    "plan_run": "inference.pipeline.plan_step",
    "RunOptions": "inference.options",
    "Runtime": "inference.pipeline.runtime",
    "run_window": "inference.pipeline.whole_run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'inference.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
