"""The whole run in one process (the CLI): the same steps the DAG runs, in the same order."""

from __future__ import annotations

from inference.config import Settings
from inference.options import RunOptions
from inference.pipeline.finish_step import finish_run
from inference.pipeline.infer_step import infer_shard, retry_failed
from inference.pipeline.load_step import has_retries, load_results
from inference.pipeline.plan_step import plan_run
from inference.predictor import Predictor
from inference.window import Window


def run_window(
    settings: Settings,
    run_id: str,
    window: Window,
    options: RunOptions | None = None,
    predictor: Predictor | None = None,
) -> dict:
    """Raises RunFailed (with the summary) when finish_run does; the model is loaded once for all shards."""
    shards = plan_run(settings, run_id, window, options)
    if shards and predictor is None:
        from inference.modelinfo import model_version
        from inference.predictor import load_predictor

        predictor = load_predictor(settings, model_version(settings))
    for shard in shards:
        infer_shard(settings, run_id, shard.shard, predictor=predictor)
    load_results(settings, run_id)
    if has_retries(settings, run_id):
        retry_failed(settings, run_id, predictor=predictor)
    return finish_run(settings, run_id)
