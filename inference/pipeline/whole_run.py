"""The whole run in one process (the CLI): the same steps the DAG runs, in the same order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference.config import Settings
from inference.heads.summary_batch import needs_encoder, uses_batch_api
from inference.options import RunOptions
from inference.pipeline.finish_step import finish_run, mark_failed
from inference.pipeline.infer_step import infer_shard, retry_failed
from inference.pipeline.load_step import has_retries, load_results
from inference.pipeline.plan_step import plan_run
from inference.predictor import Predictor
from inference.window import Window

if TYPE_CHECKING:
    from inference.batchapi.client import BatchClient


def run_window(
    settings: Settings,
    run_id: str,
    window: Window,
    options: RunOptions | None = None,
    predictor: Predictor | None = None,
    batch_client: BatchClient | None = None,
) -> dict:
    """Raises RunFailed (with the summary) when finish_run does; the model is loaded once for all shards.
    With INFERENCE_SUMMARY=batch_api the summaries come from the Batch API (`batch_client`, else one from the
    SDK's environment), waiting in this process where the DAG defers to the triggerer."""
    if batch_client is None and uses_batch_api(settings):
        from inference.batchapi.step import client_from_environment

        batch_client = client_from_environment()  # a missing key fails before anything is written
    shards = plan_run(settings, run_id, window, options)
    try:
        if shards and predictor is None and needs_encoder(settings):
            from inference.modelinfo import model_version
            from inference.predictor import load_predictor

            predictor = load_predictor(settings, model_version(settings))
        for shard in shards:
            infer_shard(settings, run_id, shard.shard, predictor=predictor, load=True)
        if shards:
            _summarize(settings, run_id, batch_client)
        load_results(settings, run_id)
        if has_retries(settings, run_id):
            retry_failed(settings, run_id, predictor=predictor)
            _summarize(settings, run_id, batch_client)
    except Exception as exc:
        # No finish_run will come (under Airflow it always runs): the run must not stay `running`.
        mark_failed(settings, run_id, exc)
        raise
    return finish_run(settings, run_id)


def _summarize(settings: Settings, run_id: str, client: BatchClient | None) -> None:
    """The DAG's summarize_batch / summarize_retries in one process: every Batch API round of the run."""
    if client is not None and uses_batch_api(settings):
        from inference.batchapi.step import summarize_all

        summarize_all(settings, run_id, client)
