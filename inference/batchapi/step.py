"""summarize_batch: the pipeline step that gets a run's summaries from the Batch API (INFERENCE_SUMMARY=batch_api).

The DAG's deferrable task calls `summarize_batch` once per wake-up (the first time, then each time its
trigger fires) and waits in the triggerer in between; the CLI's one-process run calls `summarize_all`.
Both run the same state machine (inference.batchapi.driver.advance) with the run's own load: replies whose
row is complete are validated and upserted like every other output, the rest wait for their round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from inference.batchapi.client import BatchClient
from inference.batchapi.driver import DriveSummary, Step, Wait, advance, run_batches
from inference.batchapi.submit import BatchContext
from inference.errors import ModelChanged
from inference.heads.summary_batch import needs_encoder, uses_batch_api

if TYPE_CHECKING:
    import sqlalchemy as sa

    from inference.config import Settings
    from inference.pipeline.runtime import Runtime


def batch_context(rt: Runtime) -> BatchContext:
    """The backend's context for this deployment's settings (after the encoder when other heads are configured)."""
    settings = rt.settings
    return BatchContext(
        rt.engine,
        rt.source,
        settings.batch.require_model(),
        settings.max_attempts,
        after_encoder=needs_encoder(settings),
    )


def _checked(rt: Runtime, run_id: str) -> str:
    """The run's model version; refuses a run planned with other settings (its version names another prompt,
    model or encoder: what would be sent is not what is recorded)."""
    from inference.store import runs

    with rt.engine.connect() as conn:
        planned = runs.get_run(conn, run_id).model_version
    if planned != rt.model_version:
        raise ModelChanged(
            f"run {run_id} was planned for model version {planned} but this worker's settings give "
            f"{rt.model_version} (INFERENCE_BATCH_*, INFERENCE_HEADS or the model): deploy the same settings "
            "everywhere, or start a new run"
        )
    return planned


def summarize_batch(
    settings: Settings, run_id: str, client: BatchClient, waited: Wait | None = None, overdue: bool | None = None
) -> Step:
    """One wake-up of the batch step: collect what ended, load what is complete, submit what waits for a
    summary; `step.wait` says what to wait for next (None: the run's summaries are all settled)."""
    from inference.pipeline.load_step import load_staged
    from inference.pipeline.runtime import Runtime

    with Runtime(settings) as rt:
        version = _checked(rt, run_id)
        load = lambda: load_staged(rt, run_id, version)  # noqa: E731
        return advance(batch_context(rt), client, run_id, load, waited=waited, overdue=overdue)


def summarize_all(
    settings: Settings, run_id: str, client: BatchClient, *, sleep: Callable[[float], None] | None = None
) -> DriveSummary:
    """Every round in this process, sleeping between polls (the CLI's `run`)."""
    from inference.pipeline.load_step import load_staged
    from inference.pipeline.runtime import Runtime

    with Runtime(settings) as rt:
        version = _checked(rt, run_id)
        load = lambda: load_staged(rt, run_id, version)  # noqa: E731
        if sleep is None:
            return run_batches(batch_context(rt), client, run_id, load)
        return run_batches(batch_context(rt), client, run_id, load, sleep=sleep)


def cost_summary(conn: sa.Connection, run_id: str, settings: Settings) -> dict:
    """The run summary's `batch` entry (tokens, price, cost per 1,000 tickets, next to device-seconds);
    empty unless the summaries come from the Batch API."""
    if not uses_batch_api(settings):
        return {}
    from inference.batchapi.cost import run_cost
    from inference.store.batch_tables import inference_batches

    if not conn.dialect.has_table(conn, inference_batches.name, schema=inference_batches.schema):
        return {}
    return {"batch": run_cost(conn, run_id, settings.batch).as_dict()}


def client_from_environment() -> BatchClient:
    """Outside Airflow (the CLI's `run`): the SDK's own OPENAI_API_KEY and OPENAI_BASE_URL, as a secret
    manager or the shell provides them. Under Airflow the key comes from the connection instead."""
    import openai

    from inference.errors import ConfigError

    try:
        return BatchClient(openai.OpenAI(timeout=300.0, max_retries=2))
    except openai.OpenAIError:
        raise ConfigError(
            "INFERENCE_SUMMARY=batch_api outside Airflow needs the provider's key in OPENAI_API_KEY "
            "(and a compatible provider's base URL in OPENAI_BASE_URL)"
        ) from None
