"""The steps the DAG and the CLI call: plan_run, infer_shard, load_results, retry_failed, finish_run."""

from inference.options import RunOptions
from inference.pipeline.finish_step import RunFailed, finish_run
from inference.pipeline.infer_step import ModelChanged, infer_shard, retry_failed
from inference.pipeline.load_step import load_results
from inference.pipeline.plan_step import plan_run
from inference.pipeline.runtime import Runtime
from inference.pipeline.whole_run import pending_retries, run_window

__all__ = [
    "ModelChanged",
    "RunFailed",
    "RunOptions",
    "Runtime",
    "finish_run",
    "infer_shard",
    "load_results",
    "pending_retries",
    "plan_run",
    "retry_failed",
    "run_window",
]
