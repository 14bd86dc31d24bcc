"""The summary head's `batch_api` mode (INFERENCE_SUMMARY=batch_api): the summary comes from a provider's
Batch API (inference/batchapi), not from the encoder pass.

The encoder pass, when other heads are configured, stages their outputs with `summary` NULL; the batch
step (`summarize_batch` in the DAG, `run_batches` in the CLI) fills it in, and load_results writes only
rows whose configured outputs are all there. With `summary` the only configured head nothing needs the
encoder at all. No `HEAD` here: this is a mode of inference.heads.summary, not a head of its own.
"""

from __future__ import annotations

from inference.heads.base import EncodedChunk, HeadOutput

BATCH_API = "batch_api"
COLUMN = "summary"


def uses_batch_api(settings) -> bool:
    """Whether this deployment's summaries come from the Batch API."""
    return settings.summary == BATCH_API and "summary" in settings.heads


def needs_encoder(settings) -> bool:
    """Whether a run computes anything with the local model (False: every configured output is batched)."""
    return not uses_batch_api(settings) or any(h != "summary" for h in settings.heads)


def waiting_columns(settings) -> tuple[str, ...]:
    """Output columns a staged row may still lack because the Batch API fills them in later."""
    return (COLUMN,) if uses_batch_api(settings) else ()


def fingerprint(settings) -> dict:
    """Part of the model version: the provider's model, the prompt and what else changes a summary."""
    return {"summary": BATCH_API, **settings.batch.fingerprint()}


class Deferred:
    """Stands in for the summary in the encoder pass: NULL, filled in by the batch step."""

    needs_sentences = False

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        return HeadOutput([{COLUMN: None} for _ in range(len(chunk))])
