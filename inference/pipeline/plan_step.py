"""plan: find the window's backlog, record it as run items, return small shard descriptors."""

from __future__ import annotations

from collections.abc import Iterator

from inference.config import Settings
from inference.options import RunOptions
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.plan import Candidate, Deduplicated, needs_work, shard_count, split_shards
from inference.records import Failure, FailureKind, ShardSpec, SkipReason
from inference.store import failures, items, runs
from inference.store.db import writing
from inference.store.results import current_versions, retract_results
from inference.store.schema import ITEM_FAILED, ITEM_PLANNED, ITEM_SKIPPED
from inference.store.source import SourceRow
from inference.textprep import tokens_for_chars
from inference.window import Window

PAGE = 1000


@timed_step("plan_run")
def plan_run(settings: Settings, run_id: str, window: Window, options: RunOptions | None = None) -> list[ShardSpec]:
    """Repeatable: planning the same run again replaces its previous plan (nothing was inferred yet).

    `window` is the run's own (the DAG run's data interval); options may override it, or name tickets.
    A dry run records the run and its counts only, and returns no shards.

    The source is checked first (`Source.check`, through `Runtime.source`): a shape that cannot be read by
    instant and by key is refused with a ConfigError naming the column and the fix, before anything is
    written. Then the whole backlog is read (IDs, hashes and token estimates, never text) before the plan is.
    """
    options = options or RunOptions()
    window = options.window(window)
    with Runtime(settings, create=True) as rt:  # checks the source (Runtime.source) before creating our tables
        version = rt.model_version
        rows = Deduplicated()
        candidates = list(_candidates(rt, window, version, options, rows))
        if options.limit is not None:  # the lowest IDs in the source's own order (numbers numerically)
            with rt.engine.connect() as conn:
                if options.ticket_ids is None:
                    position = rt.source.order(conn, window=window)
                else:
                    position = rt.source.order(conn, keys=options.ticket_ids)
            last = len(position)
            candidates.sort(key=lambda c: position.get(c.ticket_id, last))
            candidates = candidates[: options.limit]
        work = [c for c in candidates if not c.empty and c.id_problem is None]
        n_shards = shard_count(
            sum(c.est_tokens for c in work), settings.shard_tokens, settings.max_shards, len(work), options.shards
        )
        shards = split_shards([(c.ticket_id, c.est_tokens) for c in work], n_shards)
        shard_of = {tid: k for k, ids in enumerate(shards) for tid in ids}
        tokens = {c.ticket_id: c.est_tokens for c in work}
        unsupported = [
            Failure(c.ticket_id, c.content_hash, FailureKind.UNSUPPORTED_ID) for c in candidates if c.id_problem
        ]
        with writing(rt.engine) as conn:
            runs.start_run(conn, run_id, window, version, options.as_dict())
            if not options.dry_run:
                for k in range(0, len(candidates), items.ITEM_INSERT_PAGE):
                    items.add_items(
                        conn, [_item(run_id, c, shard_of) for c in candidates[k : k + items.ITEM_INSERT_PAGE]]
                    )
                failures.record_failures(conn, run_id, version, unsupported, settings.max_attempts)
                # A ticket emptied since its result: that result describes text that no longer exists.
                retract_results(conn, [c.ticket_id for c in candidates if c.empty and c.has_result])
            status = "dry_run" if options.dry_run else "running"
            runs.update_run(
                conn,
                run_id,
                backlog=len(candidates),
                shards=len(shards),
                status=status,
                source_duplicates=rows.duplicates,
            )
        log.info(
            "planned %srun %s window %s: %d tickets (%d to infer, %d empty, %d with an unsupported ID) in %d shards, "
            "model %s; %d duplicate source rows dropped (the newest version of each ticket kept)",
            "dry " if options.dry_run else "",
            run_id,
            window,
            len(candidates),
            len(work),
            sum(1 for c in candidates if c.empty and c.id_problem is None),
            len(unsupported),
            len(shards),
            version,
            rows.duplicates,
        )
        if options.dry_run:
            return []
        return [ShardSpec(run_id, k, len(ids), sum(tokens[t] for t in ids)) for k, ids in enumerate(shards)]


def _item(run_id: str, c: Candidate, shard_of: dict[str, int]) -> dict:
    if c.id_problem:
        status, reason, shard = ITEM_FAILED, str(FailureKind.UNSUPPORTED_ID), -1
    elif c.empty:
        status, reason, shard = ITEM_SKIPPED, str(SkipReason.EMPTY_INPUT), -1
    else:
        status, reason, shard = ITEM_PLANNED, None, shard_of[c.ticket_id]
    return dict(
        run_id=run_id,
        ticket_id=c.ticket_id,
        shard=shard,
        est_tokens=c.est_tokens,
        content_hash=c.content_hash,
        status=status,
        reason=reason,
        attempts=0,
    )


def _read_source(rt: Runtime, read, window: Window, options: RunOptions, rows: Deduplicated) -> None:
    """Every source row of the window (or of the named tickets), one per ticket ID: the newest wins."""
    if options.ticket_ids is None:
        for row in rt.source.scan_window(read, window):
            rows.add(row)
        return
    for row in rt.source.scan_ids(read, options.ticket_ids):
        rows.add(row)
    if len(rows) < len(set(options.ticket_ids)):
        log.warning(
            "%d of %d requested ticket IDs do not exist",
            len(set(options.ticket_ids)) - len(rows),
            len(options.ticket_ids),
        )


def _candidates(
    rt: Runtime, window: Window, version: str, options: RunOptions, rows: Deduplicated
) -> Iterator[Candidate]:
    """Named tickets are always recomputed (that is why they were named); a window only where needed."""
    max_len = rt.settings.max_seq_length
    force = options.reprocess or options.ticket_ids is not None
    with rt.engine.connect() as read, rt.engine.connect() as lookup:
        _read_source(rt, read, window, options, rows)
        dead = failures.dead_letters(lookup, version)
        ordered = rows.rows()
        for k in range(0, len(ordered), PAGE):
            yield from _judge(lookup, ordered[k : k + PAGE], version, dead, force, max_len)


def _judge(lookup, page: list[SourceRow], version, dead, reprocess, max_len) -> Iterator[Candidate]:
    stored = current_versions(lookup, [t.ticket_id for t in page if t.id_problem is None])
    for t in page:
        if needs_work(t.content_hash, stored.get(t.ticket_id), version, dead.get(t.ticket_id), reprocess):
            est = tokens_for_chars(t.chars, max_len)
            yield Candidate(t.ticket_id, t.content_hash, est, t.empty, t.ticket_id in stored, t.id_problem)
