"""infer_shard and retry_failed: model work, committed chunk by chunk so a killed task resumes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from inference.config import Settings
from inference.errors import ModelChanged
from inference.options import options_from_record
from inference.pipeline import compute
from inference.pipeline.compute import ChunkOutcome, Model, PreparedChunk
from inference.pipeline.load_step import load_staged
from inference.pipeline.overlap import WriteBehind, prefetched
from inference.pipeline.runtime import Runtime, log
from inference.records import Failure, FailureKind
from inference.store import runs
from inference.store.db import writing
from inference.store.schema import ITEM_SKIPPED, ITEM_STAGED
from inference.textprep import content_hash


def checked_model(rt: Runtime, run_id: str, model: Model | None) -> Model:
    """The run's model, loaded here unless given; refuses a model other than the one planned for.
    The run's own max_batch_tokens option (a trigger param) wins over the worker's setting."""
    with rt.engine.connect() as conn:
        run = runs.get_run(conn, run_id)
    have = model.version if model is not None else rt.model_version
    if run.model_version != have:
        raise ModelChanged(
            f"run {run_id} was planned for model {run.model_version} but this worker has {have}: "
            "deploy the same model everywhere, or start a new run"
        )
    model = model or compute.load(rt.settings, run.model_version)
    budget = options_from_record(run.options).max_batch_tokens
    return model.with_budget(budget) if budget else model


def commit(rt: Runtime, run_id: str, version: str, outcome: ChunkOutcome) -> ChunkOutcome:
    """Outputs, skips, failures and metrics of one chunk: all of them or none.

    Only items still waiting for the model (planned, or failed and being retried) take this outcome:
    a late second copy of the shard (say, a zombie task) must not undo what another copy settled.
    Returns the part of the outcome that was applied.
    """
    ids = [r["ticket_id"] for r in outcome.staged] + [f.ticket_id for f in outcome.failures]
    ids += [t for group in outcome.skipped.values() for t in group]
    with writing(rt.engine) as conn:
        open_ = runs.lock_open_items(conn, run_id, ids)
        applied = ChunkOutcome(
            staged=[r for r in outcome.staged if r["ticket_id"] in open_],
            failures=[f for f in outcome.failures if f.ticket_id in open_],
            skipped={k: [t for t in v if t in open_] for k, v in outcome.skipped.items()},
            real_tokens=outcome.real_tokens,
            padded_tokens=outcome.padded_tokens,
            seconds=outcome.seconds,
        )
        runs.stage(conn, applied.staged)
        runs.set_items(conn, run_id, [r["ticket_id"] for r in applied.staged], ITEM_STAGED, None)
        for reason, group in applied.skipped.items():
            runs.set_items(conn, run_id, group, ITEM_SKIPPED, reason)
        runs.record_failures(conn, run_id, version, applied.failures, rt.settings.max_attempts)
        runs.add_run_metrics(conn, run_id, outcome.real_tokens, outcome.padded_tokens, outcome.seconds)
    return applied


_TALLY = threading.Lock()  # the write-behind thread and the main thread both count


def _tally(totals: dict, outcome: ChunkOutcome) -> None:
    with _TALLY:
        _count(totals, outcome)


def _count(totals: dict, outcome: ChunkOutcome) -> None:
    totals["staged"] += len(outcome.staged)
    totals["failed"] += len(outcome.failures)
    totals["skipped"] += sum(len(v) for v in outcome.skipped.values())
    totals["real_tokens"] += outcome.real_tokens
    totals["padded_tokens"] += outcome.padded_tokens
    totals["seconds"] += outcome.seconds


def _new_totals() -> dict:
    return dict.fromkeys(("staged", "failed", "skipped", "real_tokens", "padded_tokens", "seconds"), 0)


def process(rt: Runtime, model: Model, run_id: str, ticket_ids: list[str], totals: dict) -> None:
    """Claim (committed), read the current text, run the model, commit the outcome."""
    with writing(rt.engine) as conn:
        runs.claim(conn, run_id, ticket_ids)
    with rt.engine.connect() as conn:
        current = rt.source.by_ids(conn, ticket_ids)
    outcome = compute.compute_chunk(model, run_id, ticket_ids, current)
    _tally(totals, commit(rt, run_id, model.version, outcome))


def _crashed_too_often(rt: Runtime, run_id: str, version: str, ticket_id: str, totals: dict) -> None:
    with rt.engine.connect() as conn:
        digest = rt.source.by_ids(conn, [ticket_id]).get(ticket_id)
    failure = Failure(
        ticket_id, content_hash(digest.subject, digest.body) if digest else "0" * 64, FailureKind.PROCESS_CRASH
    )
    _tally(totals, commit(rt, run_id, version, ChunkOutcome(failures=[failure])))


def _pages(rt: Runtime, model: Model, run_id: str, shard: int) -> Iterator[tuple[list[tuple[str, int]], PreparedChunk]]:
    """The shard's pending pages, with the never-attempted items read and tokenized (prefetch thread)."""
    after = ""
    while True:
        with rt.engine.connect() as conn:
            page = runs.pending_items(conn, run_id, shard, after, rt.settings.chunk_size)
            if not page:
                return
            fresh = [ticket_id for ticket_id, attempts in page if attempts == 0]
            current = rt.source.by_ids(conn, fresh) if fresh else {}
        yield page, compute.prepare_chunk(model, fresh, current)
        after = page[-1][0]


def infer_shard(settings: Settings, run_id: str, shard: int, model: Model | None = None) -> dict:
    """Works through the shard's still-planned items in ticket_id order, one committed chunk at a time.

    Reading and tokenizing the next chunk, and writing the previous one, overlap with the model.
    A rerun (after a kill, or a second copy running at once) only sees what is still planned.
    Items a dead process had taken to the model are redone one at a time, so an item that kills the
    process is isolated; after INFERENCE_MAX_ATTEMPTS such deaths it is dead-lettered unseen.
    """
    with Runtime(settings) as rt:
        model = checked_model(rt, run_id, model)
        totals = _new_totals()

        def write(outcome: ChunkOutcome) -> None:
            _tally(totals, commit(rt, run_id, model.version, outcome))

        writer = WriteBehind(write)
        try:
            for page, prepared in prefetched(_pages(rt, model, run_id, shard)):
                for ticket_id, attempts in page:
                    if attempts >= settings.max_attempts:
                        _crashed_too_often(rt, run_id, model.version, ticket_id, totals)
                    elif attempts > 0:
                        process(rt, model, run_id, [ticket_id], totals)
                if prepared.ticket_ids:
                    with writing(rt.engine) as conn:
                        runs.claim(conn, run_id, prepared.ticket_ids)
                    writer.submit(compute.run_chunk(model, run_id, prepared))
        finally:
            writer.close()
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
    """Retries this run's retryable failures one item per forward pass, in float32, with fresh text.

    Each pass counts an attempt; an item still failing at INFERENCE_MAX_ATTEMPTS is dead-lettered,
    so the loop always ends. Successes are loaded at once (and so is anything a killed earlier try
    of this task had staged).
    """
    with Runtime(settings) as rt:
        model = checked_model(rt, run_id, model).for_retry(settings)
        loaded = load_staged(rt, run_id, model.version)
        recovered = loaded["written"] + loaded["unchanged"]
        totals = _new_totals()
        passes = 0
        while passes < settings.max_attempts:
            with rt.engine.connect() as conn:
                ids = _all_retryable(conn, run_id, settings.chunk_size)
            if not ids:
                break
            passes += 1
            for k in range(0, len(ids), settings.chunk_size):
                process(rt, model, run_id, ids[k : k + settings.chunk_size], totals)
            loaded = load_staged(rt, run_id, model.version)
            recovered += loaded["written"] + loaded["unchanged"]
        with rt.engine.connect() as conn:
            left = runs.count_retryable(conn, run_id)
            dead = runs.count_dead(conn, run_id)
        log.info(
            "run %s retry: %d passes, %d recovered, %d dead-lettered, %d still pending",
            run_id,
            passes,
            recovered,
            dead,
            left,
        )
        return {"run_id": run_id, "passes": passes, "recovered": recovered, "dead_letter": dead, "pending": left}


def _all_retryable(conn, run_id: str, page: int) -> list[str]:
    ids: list[str] = []
    while batch := runs.retryable_items(conn, run_id, ids[-1] if ids else "", page):
        ids.extend(batch)
    return ids
