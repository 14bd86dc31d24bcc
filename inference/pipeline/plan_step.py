"""plan: find the window's backlog, record it as run items, return small shard descriptors."""

from __future__ import annotations

from collections.abc import Iterator

from inference.config import Settings
from inference.options import RunOptions
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.plan import Candidate, needs_work, shard_count, split_shards
from inference.records import ShardSpec, SkipReason, SourceTicket
from inference.store import failures, items, runs
from inference.store.db import writing
from inference.store.results import current_versions, retract_results
from inference.store.schema import ITEM_PLANNED, ITEM_SKIPPED
from inference.textprep import content_hash, estimate_tokens, max_chars_for, model_input
from inference.window import Window

PAGE = 1000


@timed_step("plan_run")
def plan_run(settings: Settings, run_id: str, window: Window, options: RunOptions | None = None) -> list[ShardSpec]:
    """Repeatable: planning the same run again replaces its previous plan (nothing was inferred yet).

    `window` is the run's own (the DAG run's data interval); options may override it, or name tickets.
    A dry run records the run and its counts only, and returns no shards.
    """
    options = options or RunOptions()
    window = options.window(window)
    with Runtime(settings, create=True) as rt:
        version = rt.model_version
        candidates = sorted(_candidates(rt, window, version, options), key=lambda c: c.ticket_id)
        if options.limit is not None:
            candidates = candidates[: options.limit]
        work = [c for c in candidates if not c.empty]
        n_shards = shard_count(
            sum(c.est_tokens for c in work), settings.shard_tokens, settings.max_shards, len(work), options.shards
        )
        shards = split_shards([(c.ticket_id, c.est_tokens) for c in work], n_shards)
        shard_of = {tid: k for k, ids in enumerate(shards) for tid in ids}
        tokens = {c.ticket_id: c.est_tokens for c in work}
        planned = [
            dict(
                run_id=run_id,
                ticket_id=c.ticket_id,
                shard=-1 if c.empty else shard_of[c.ticket_id],
                est_tokens=c.est_tokens,
                content_hash=c.content_hash,
                status=ITEM_SKIPPED if c.empty else ITEM_PLANNED,
                reason=SkipReason.EMPTY_INPUT if c.empty else None,
                attempts=0,
            )
            for c in candidates
        ]
        with writing(rt.engine) as conn:
            runs.start_run(conn, run_id, window, version, options.as_dict())
            if not options.dry_run:
                items.add_items(conn, planned)
                # A ticket emptied since its result: that result describes text that no longer exists.
                retract_results(conn, [c.ticket_id for c in candidates if c.empty and c.has_result])
            status = "dry_run" if options.dry_run else "running"
            runs.update_run(conn, run_id, backlog=len(planned), shards=len(shards), status=status)
        log.info(
            "planned %srun %s window %s: %d tickets (%d to infer, %d empty) in %d shards, model %s",
            "dry " if options.dry_run else "",
            run_id,
            window,
            len(planned),
            len(work),
            len(planned) - len(work),
            len(shards),
            version,
        )
        if options.dry_run:
            return []
        return [ShardSpec(run_id, k, len(ids), sum(tokens[t] for t in ids)) for k, ids in enumerate(shards)]


def _source_rows(rt: Runtime, read, window: Window, options: RunOptions) -> Iterator[SourceTicket]:
    if options.ticket_ids is None:
        yield from rt.source.in_window(read, window)
        return
    found = rt.source.by_ids(read, options.ticket_ids)
    if len(found) < len(options.ticket_ids):
        log.warning(
            "%d of %d requested ticket IDs do not exist", len(options.ticket_ids) - len(found), len(options.ticket_ids)
        )
    yield from found.values()


def _candidates(rt: Runtime, window: Window, version: str, options: RunOptions) -> Iterator[Candidate]:
    """Named tickets are always recomputed (that is why they were named); a window only where needed."""
    max_len = rt.settings.max_seq_length
    force = options.reprocess or options.ticket_ids is not None
    with rt.engine.connect() as read, rt.engine.connect() as lookup:
        dead = failures.dead_letters(lookup, version)
        page: list[SourceTicket] = []
        for ticket in _source_rows(rt, read, window, options):
            page.append(ticket)
            if len(page) >= PAGE:
                yield from _judge(lookup, page, version, dead, force, max_len)
                page = []
        yield from _judge(lookup, page, version, dead, force, max_len)


def _judge(lookup, page, version, dead, reprocess, max_len) -> Iterator[Candidate]:
    if not page:
        return
    stored = current_versions(lookup, [t.ticket_id for t in page])
    for t in page:
        digest = content_hash(t.subject, t.body)
        if needs_work(digest, stored.get(t.ticket_id), version, dead.get(t.ticket_id), reprocess):
            text, _ = model_input(t.subject, t.body, max_chars_for(max_len))
            has_result = t.ticket_id in stored
            yield Candidate(t.ticket_id, digest, estimate_tokens(t.subject, t.body, max_len), text is None, has_result)
