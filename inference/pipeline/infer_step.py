"""infer_shard and retry_failed: model work, committed chunk by chunk so a killed task resumes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from inference.config import Settings
from inference.errors import ModelChanged
from inference.heads.summary_batch import needs_encoder
from inference.options import options_from_record
from inference.pipeline.load_step import Loader, load_staged
from inference.pipeline.overlap import WriteBehind, prefetched
from inference.pipeline.progress import Progress
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.predictor import ChunkOutcome, Predictor, PreparedChunk, load_predictor
from inference.records import Failure, FailureKind, InferSummary, RetrySummary, SourceVersion, TicketInput
from inference.store import failures, items, metrics, runs, staging
from inference.store.db import utcnow, writing
from inference.store.schema import ITEM_SKIPPED, ITEM_STAGED, ITEM_SUCCEEDED


def checked_predictor(rt: Runtime, run_id: str, predictor: Predictor | None) -> Predictor:
    """The run's predictor, loaded here unless given; refuses a model other than the one planned for.
    The run's own max_batch_tokens option (a trigger param) wins over the worker's setting."""
    with rt.engine.connect() as conn:
        run = runs.get_run(conn, run_id)
    have = predictor.version if predictor is not None else rt.model_version
    if run.model_version != have:
        raise ModelChanged(
            f"run {run_id} was planned for model {run.model_version} but this worker has {have}: "
            "deploy the same model everywhere, or start a new run"
        )
    predictor = predictor or load_predictor(rt.settings, run.model_version)
    budget = options_from_record(run.options).max_batch_tokens
    return predictor.with_budget(budget) if budget else predictor


@dataclass(frozen=True)
class TaskInfo:
    """Which task a chunk belongs to, for its metrics row (inference_chunks); numbers its chunks 1, 2, ..."""

    step: str
    shard: int
    started_at: dt.datetime
    seq: Iterator[int] = field(default_factory=lambda: itertools.count(1), compare=False)


def commit(
    rt: Runtime,
    run_id: str,
    version: str,
    outcome: ChunkOutcome,
    task: TaskInfo | None = None,
    loader: Loader | None = None,
    as_read: Mapping[str, tuple[str, SourceVersion]] | None = None,
    *,
    dense: bool = False,
) -> tuple[ChunkOutcome, int]:
    """Outputs, skips, failures and metrics of one chunk: all of them or none.

    Only items still waiting for the model (planned, or failed and being retried) take this outcome:
    a late second copy of the shard (say, a zombie task) must not undo what another copy settled.
    With a `loader`, the outputs are loaded in this same transaction instead of being staged (validated
    against the source read again, upserted, their items settled, as load_results would), unless they wait
    for the Batch API's summaries: staging is only for what waits (`as_read`: the inputs' row versions as the
    model read them, see `read_as`). `dense`: the chunk is consecutive items of a shard (infer_shard's
    chunks; see `items.take_open_items`). Returns the part of the outcome that was applied, and how many of
    its results were loaded and are now current.
    """
    loading = loader is not None and not loader.waiting
    with writing(rt.engine) as conn:
        # The items of the outputs are taken with the state they will most likely end in (a loaded result:
        # succeeded), the others (failures, skips: few) only locked; the load below sets any other outcome.
        staged = {r.ticket_id for r in outcome.staged}
        taken = items.take_open_items(conn, run_id, staged, ITEM_SUCCEEDED if loading else ITEM_STAGED, dense=dense)
        others = [t for t in outcome.ticket_ids if t not in staged]
        applied = outcome.only(taken | (items.lock_open_items(conn, run_id, others) if others else set()))
        loaded = 0
        if loading:
            if applied.staged:  # open items have no staged row: a row is staged with its item set staged, below
                loaded = loader.load(conn, applied.staged, taken, in_staging=False, as_read=as_read, taken=taken)
                loaded = loaded.settled
        else:
            staging.stage(conn, applied.staged)
        for reason, group in applied.skipped.items():
            items.set_items(conn, run_id, group, ITEM_SKIPPED, reason)
        failures.record_failures(conn, run_id, version, applied.failures, rt.settings.max_attempts)
        runs.add_run_metrics(conn, run_id, outcome.real_tokens, outcome.padded_tokens, outcome.seconds)
        if task is not None:
            _record_chunk(conn, run_id, task, outcome, applied)
    return applied, loaded


def read_as(tickets: Iterable[TicketInput]) -> dict[str, tuple[str, SourceVersion]]:
    """What the model read of each ticket, for the check before writing: its rows' versions (where the
    source has them) and its content hash and version time then."""
    return {
        t.ticket_id: (t.row_version, SourceVersion(t.content_hash, t.version_at))
        for t in tickets
        if t.row_version is not None
    }


def _record_chunk(conn, run_id: str, task: TaskInfo, outcome: ChunkOutcome, applied: ChunkOutcome) -> None:
    """The chunk's metrics row: counts of what was applied, the model work that was done, and histograms
    (token lengths, categories) of the staged results. Labels and counts only."""
    staged = applied.staged
    metrics.add_chunk(
        conn,
        run_id=run_id,
        step=task.step,
        shard=task.shard,
        step_started_at=task.started_at,
        seq=next(task.seq),
        tickets=len(applied.ticket_ids),
        staged=len(staged),
        failed=len(applied.failures),
        skipped=sum(len(v) for v in applied.skipped.values()),
        truncated=sum(1 for r in staged if r.truncated),
        uncertain=sum(1 for r in staged if r.outputs.get("category_uncertain")),
        real_tokens=outcome.real_tokens,
        padded_tokens=outcome.padded_tokens,
        model_seconds=outcome.seconds,
        batch_sizes=outcome.batch_sizes,
        token_lengths=Counter(r.input_tokens for r in staged),
        categories=Counter(str(r.outputs["category"]) for r in staged if r.outputs.get("category") is not None),
    )


class _Tally:
    """Counts of what was applied; the write-behind thread and the main thread both add to it.
    With a Progress, each added chunk also logs a progress line."""

    def __init__(self, summary: InferSummary, progress: Progress | None = None):
        self.summary = summary
        self.progress = progress
        self._lock = threading.Lock()

    def add(self, outcome: ChunkOutcome, loaded: int = 0) -> None:
        self.add_counts(outcome_counts(outcome), loaded)

    def add_counts(self, counts: Mapping[str, float], loaded: int = 0) -> None:
        """`add` for an outcome already reduced to its counts (`outcome_counts`: the writer process's)."""
        with self._lock:
            s = self.summary
            s.staged += counts["staged"]
            s.failed += counts["failed"]
            s.skipped += counts["skipped"]
            s.real_tokens += counts["real_tokens"]
            s.padded_tokens += counts["padded_tokens"]
            s.seconds += counts["seconds"]
            s.loaded += loaded
        if self.progress is not None:
            tickets = counts["staged"] + counts["failed"] + counts["skipped"]
            self.progress.chunk(tickets, counts["failed"], counts["real_tokens"], counts["padded_tokens"])


def outcome_counts(outcome: ChunkOutcome) -> dict[str, float]:
    """What a tally needs of an applied outcome: counts only (no IDs, no outputs)."""
    return {
        "staged": len(outcome.staged),
        "failed": len(outcome.failures),
        "skipped": sum(len(v) for v in outcome.skipped.values()),
        "real_tokens": outcome.real_tokens,
        "padded_tokens": outcome.padded_tokens,
        "seconds": outcome.seconds,
    }


def process(
    rt: Runtime,
    predictor: Predictor,
    run_id: str,
    ticket_ids: list[str],
    tally: _Tally,
    task: TaskInfo | None = None,
    loader: Loader | None = None,
) -> None:
    """Claim (committed), read the current text, run the model, commit the outcome."""
    with writing(rt.engine) as conn:
        items.claim(conn, run_id, ticket_ids)
    with rt.engine.connect() as conn:
        current = rt.source.model_inputs(conn, ticket_ids, predictor.input_text)
    outcome = predictor.compute(run_id, ticket_ids, current)
    tally.add(*commit(rt, run_id, predictor.version, outcome, task, loader, read_as(current.values())))


def _crashed_too_often(
    rt: Runtime, run_id: str, version: str, ticket_id: str, tally: _Tally, task: TaskInfo | None = None
) -> None:
    with rt.engine.connect() as conn:
        ticket = rt.source.versions(conn, [ticket_id]).get(ticket_id)
    digest = ticket.content_hash if ticket else "0" * 64
    failure = Failure(ticket_id, digest, FailureKind.PROCESS_CRASH)
    tally.add(*commit(rt, run_id, version, ChunkOutcome(failures=[failure]), task))


def _start_line(rt: Runtime, predictor: Predictor, run_id: str, where: str, total: int, done: int) -> None:
    from inference.modelinfo import model_id

    encoder = predictor.encoder
    log.info(
        "run %s %s: model %s, version %s, device %s, dtype %s, token budget %s padded tokens per forward pass "
        "(at most %s tickets), chunks of %s tickets, %s tickets (%s done before)",
        run_id,
        where,
        model_id(rt.settings.model_dir),
        predictor.version,
        encoder.device_type,
        encoder.dtype_name,
        f"{encoder.max_batch_tokens:,}",
        f"{encoder.max_batch_size:,}",
        f"{rt.settings.chunk_size:,}",
        f"{total:,}",
        f"{done:,}",
    )


def _pages(
    rt: Runtime, predictor: Predictor, run_id: str, shard: int
) -> Iterator[tuple[list[tuple[str, int]], PreparedChunk]]:
    """The shard's pending pages, with the never-attempted items read and tokenized (prefetch thread)."""
    after = ""
    while True:
        with rt.engine.connect() as conn:
            page = items.pending_items(conn, run_id, shard, after, rt.settings.chunk_size)
            if not page:
                return
            fresh = [ticket_id for ticket_id, attempts in page if attempts == 0]
            current = rt.source.model_inputs(conn, fresh, predictor.input_text) if fresh else {}
        yield page, predictor.prepare(fresh, current)
        after = page[-1][0]


def _writer(rt: Runtime, run_id: str, version: str, task: TaskInfo, loader: Loader | None, tally: _Tally):
    """Where infer_shard's chunks are committed (INFERENCE_WRITER): a thread of this process, or a process of
    their own (inference.pipeline.writer_process). Items are (seq, outcome, as_read); seq numbers the chunk's
    metrics row, taken here so the chunks redone one at a time on this thread never share a number with them."""
    if rt.settings.writer == "process":
        from inference.pipeline.writer_process import WriteProcess, WriterJob

        job = WriterJob(rt.settings, run_id, version, task.step, task.shard, task.started_at, loader is not None)
        writer = WriteProcess(job, lambda written: tally.add_counts(written.counts, written.loaded))
        log.info("run %s shard %d: chunks are committed by writer process %d", run_id, task.shard, writer.pid)
        return writer

    def write(item) -> None:
        seq, outcome, as_read = item
        numbered = dataclasses.replace(task, seq=iter((seq,)))
        tally.add(*commit(rt, run_id, version, outcome, numbered, loader, as_read, dense=True))

    return WriteBehind(write)


@timed_step("infer_shard", shard_arg=2)
def infer_shard(
    settings: Settings, run_id: str, shard: int, predictor: Predictor | None = None, *, load: bool = False
) -> InferSummary:
    """Works through the shard's still-planned items in ticket_id order, one committed chunk at a time.

    Reading and tokenizing the next chunk, and writing the previous one, overlap with the model.
    `load` (the DAG and the CLI): each chunk's results are loaded as it commits (see `commit`), so they are
    visible while other shards still run and load_results finds little left; without it they wait in
    staging for load_results.
    A rerun (after a kill, or a second copy running at once) only sees what is still planned.
    Items a dead process had taken to the model are redone one at a time, so an item that kills the
    process is isolated; after INFERENCE_MAX_ATTEMPTS such deaths it is dead-lettered unseen.
    """
    if not needs_encoder(settings):  # every output comes from the Batch API (the batch step sends them)
        return InferSummary(run_id, shard)
    with Runtime(settings) as rt:
        predictor = checked_predictor(rt, run_id, predictor)
        with rt.engine.connect() as conn:
            total, done = metrics.shard_progress(conn, run_id, shard)
        _start_line(rt, predictor, run_id, f"infer_shard shard {shard}", total, done)
        task = TaskInfo("infer_shard", shard, utcnow())
        tally = _Tally(InferSummary(run_id, shard), Progress(run_id, "infer_shard", shard, total, done))
        loader = Loader(rt, run_id, predictor.version) if load else None
        writer = _writer(rt, run_id, predictor.version, task, loader, tally)
        try:
            for page, prepared in prefetched(_pages(rt, predictor, run_id, shard)):
                for ticket_id, attempts in page:
                    if attempts >= settings.max_attempts:
                        _crashed_too_often(rt, run_id, predictor.version, ticket_id, tally, task)
                    elif attempts > 0:
                        process(rt, predictor, run_id, [ticket_id], tally, task, loader)
                if prepared.ticket_ids:
                    with writing(rt.engine) as conn:
                        items.claim(conn, run_id, prepared.ticket_ids, dense=True)
                    writer.submit((next(task.seq), predictor.run(run_id, prepared), read_as(prepared.tickets)))
        except BaseException:
            writer.abort()  # a writer process stops after its current chunk instead of committing the rest
            raise
        finally:
            writer.close()
        s = tally.summary
        log.info(
            "run %s shard %d: %d staged (%d of them loaded), %d failed, %d skipped, %d tokens in %.1fs",
            run_id,
            shard,
            s.staged,
            s.loaded,
            s.failed,
            s.skipped,
            s.real_tokens,
            s.seconds,
        )
        return s


@timed_step("retry_failed")
def retry_failed(settings: Settings, run_id: str, predictor: Predictor | None = None) -> RetrySummary:
    """Retries this run's retryable failures one item per forward pass, in float32, with fresh text.

    Each pass counts an attempt; an item still failing at INFERENCE_MAX_ATTEMPTS is dead-lettered,
    so the loop always ends. Successes are loaded at once (and so is anything a killed earlier try
    of this task had staged).
    """
    if not needs_encoder(settings):  # every output comes from the Batch API: its next round resends them
        return RetrySummary(run_id)
    with Runtime(settings) as rt:
        predictor = checked_predictor(rt, run_id, predictor).for_retry()
        summary = RetrySummary(run_id)
        summary.recovered = load_staged(rt, run_id, predictor.version).settled
        task = TaskInfo("retry_failed", -1, utcnow())
        tally = _Tally(InferSummary(run_id, -1))
        while summary.passes < settings.max_attempts:
            with rt.engine.connect() as conn:
                ids = _all_retryable(conn, run_id, settings.chunk_size)
            if not ids:
                break
            summary.passes += 1
            if summary.passes == 1:
                _start_line(rt, predictor, run_id, "retry_failed", len(ids), 0)
            tally.progress = Progress(run_id, f"retry_failed pass {summary.passes}", -1, len(ids))
            for k in range(0, len(ids), settings.chunk_size):
                process(rt, predictor, run_id, ids[k : k + settings.chunk_size], tally, task)
            summary.recovered += load_staged(rt, run_id, predictor.version).settled
        with rt.engine.connect() as conn:
            summary.pending = failures.count_retryable(conn, run_id)
            summary.dead_letter = failures.count_dead(conn, run_id)
        log.info(
            "run %s retry: %d passes, %d recovered, %d dead-lettered, %d still pending",
            run_id,
            summary.passes,
            summary.recovered,
            summary.dead_letter,
            summary.pending,
        )
        return summary


def _all_retryable(conn, run_id: str, page: int) -> list[str]:
    ids: list[str] = []
    while batch := failures.retryable_items(conn, run_id, ids[-1] if ids else "", page):
        ids.extend(batch)
    return ids
