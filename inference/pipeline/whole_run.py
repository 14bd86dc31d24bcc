"""The whole run in one process (the CLI): the same steps the DAG runs, in the same order."""

from __future__ import annotations

from inference.config import Settings
from inference.modelinfo import model_version
from inference.options import RunOptions
from inference.pipeline.finish_step import finish_run
from inference.pipeline.infer_step import infer_shard, retry_failed
from inference.pipeline.load_step import load_results, pending_retries
from inference.pipeline.plan_step import plan_run
from inference.window import Window


def run_window(settings: Settings, run_id: str, window: Window, options: RunOptions | None = None, model=None) -> dict:
    """Raises RunFailed (with the summary) when finish_run does; the model is loaded once for all shards."""
    shards = plan_run(settings, run_id, window, options)
    if shards and model is None:
        from inference.pipeline import compute

        model = compute.load(settings, model_version(settings))
    for shard in shards:
        infer_shard(settings, run_id, shard["shard"], model=model)
    load_results(settings, run_id)
    if pending_retries(settings, run_id):
        retry_failed(settings, run_id, model=model)
    return finish_run(settings, run_id)
