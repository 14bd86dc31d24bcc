"""infer_shard and retry_failed: model work, committed chunk by chunk so a killed task resumes."""

from __future__ import annotations

from inference.config import Settings
from inference.pipeline import compute
from inference.pipeline.compute import ChunkOutcome, Model
from inference.pipeline.load_step import load_staged
from inference.pipeline.runtime import Runtime, log
from inference.store import runs
from inference.store.db import writing
from inference.store.schema import ITEM_SKIPPED, ITEM_STAGED


class ModelChanged(RuntimeError):
    """The model or head configuration changed after the run was planned."""


def checked_model(rt: Runtime, run_id: str, model: Model | None) -> Model:
    """The run's model, loaded here unless given; refuses a model other than the one planned for."""
    with rt.engine.connect() as conn:
        planned = runs.get_run(conn, run_id).model_version
    have = model.version if model is not None else rt.model_version
    if planned != have:
        raise ModelChanged(
            f"run {run_id} was planned for model {planned} but this worker has {have}: "
            "deploy the same model everywhere, or start a new run"
        )
    return model or compute.load(rt.settings, planned)


def commit(rt: Runtime, run_id: str, version: str, outcome: ChunkOutcome) -> None:
    """Outputs, skips, failures and metrics of one chunk: all of them or none."""
    with writing(rt.engine) as conn:
        runs.stage(conn, outcome.staged)
        runs.set_items(conn, run_id, [r["ticket_id"] for r in outcome.staged], ITEM_STAGED, None)
        for reason, ids in outcome.skipped.items():
            runs.set_items(conn, run_id, ids, ITEM_SKIPPED, reason)
        runs.record_failures(conn, run_id, version, outcome.failures, rt.settings.max_attempts)
        runs.add_run_metrics(conn, run_id, outcome.real_tokens, outcome.padded_tokens, outcome.seconds)


def _tally(totals: dict, outcome: ChunkOutcome) -> None:
    totals["staged"] += len(outcome.staged)
    totals["failed"] += len(outcome.failures)
    totals["skipped"] += sum(len(v) for v in outcome.skipped.values())
    totals["real_tokens"] += outcome.real_tokens
    totals["padded_tokens"] += outcome.padded_tokens
    totals["seconds"] += outcome.seconds


def infer_shard(settings: Settings, run_id: str, shard: int, model: Model | None = None) -> dict:
    """Works through the shard's still-planned items in ticket_id order, one committed chunk at a time.

    A rerun (after a kill, or a second copy running at once) only sees what is still planned.
    """
    with Runtime(settings) as rt:
        model = checked_model(rt, run_id, model)
        totals = dict.fromkeys(("staged", "failed", "skipped", "real_tokens", "padded_tokens", "seconds"), 0)
        after = ""
        while True:
            with rt.engine.connect() as conn:
                ids = runs.pending_items(conn, run_id, shard, after, settings.chunk_size)
                if not ids:
                    break
                current = rt.source.by_ids(conn, ids)
            outcome = compute.compute_chunk(model, run_id, ids, current)
            commit(rt, run_id, model.version, outcome)
            _tally(totals, outcome)
            after = ids[-1]
        log.info(
            "run %s shard %d: %d staged, %d failed, %d skipped, %d tokens in %.1fs",
            run_id,
            shard,
            totals["staged"],
            totals["failed"],
            totals["skipped"],
            totals["real_tokens"],
            totals["seconds"],
        )
        return {"run_id": run_id, "shard": shard, **totals}


def retry_failed(settings: Settings, run_id: str, model: Model | None = None) -> dict:
    """Retries this run's retryable failures one item per forward pass, with fresh ticket text.

    Each pass counts an attempt; an item still failing at INFERENCE_MAX_ATTEMPTS is dead-lettered,
    so the loop always ends. Successes are loaded at once.
    """
    with Runtime(settings) as rt:
        model = checked_model(rt, run_id, model).isolated()
        totals = dict.fromkeys(("staged", "failed", "skipped", "real_tokens", "padded_tokens", "seconds"), 0)
        passes = 0
        for passes in range(1, settings.max_attempts + 1):  # noqa: B007 - reported below
            with rt.engine.connect() as conn:
                ids = _all_retryable(conn, run_id, settings.chunk_size)
            if not ids:
                passes -= 1
                break
            for k in range(0, len(ids), settings.chunk_size):
                chunk = ids[k : k + settings.chunk_size]
                with rt.engine.connect() as conn:
                    current = rt.source.by_ids(conn, chunk)
                outcome = compute.compute_chunk(model, run_id, chunk, current)
                commit(rt, run_id, model.version, outcome)
                _tally(totals, outcome)
            load_staged(rt, run_id, model.version)
        with rt.engine.connect() as conn:
            left = runs.count_retryable(conn, run_id)
        log.info("run %s retry: %d passes, %d recovered, %d still pending", run_id, passes, totals["staged"], left)
        return {"run_id": run_id, "passes": passes, "recovered": totals["staged"], "pending": left}


def _all_retryable(conn, run_id: str, page: int) -> list[str]:
    ids: list[str] = []
    while batch := runs.retryable_items(conn, run_id, ids[-1] if ids else "", page):
        ids.extend(batch)
    return ids
