"""plan: find the window's backlog, record it as run items, return small shard descriptors."""

from __future__ import annotations

from collections.abc import Iterator

from inference.config import Settings
from inference.options import RunOptions
from inference.pipeline.overlap import prefetched
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.plan import shard_count
from inference.records import Failure, FailureKind, ShardSpec
from inference.store import bulk, failures, planning, runs
from inference.store.db import writing
from inference.store.results import retract_results
from inference.store.schema import inference_run_items
from inference.store.source import SourceRow
from inference.window import Window


@timed_step("plan_run")
def plan_run(settings: Settings, run_id: str, window: Window, options: RunOptions | None = None) -> list[ShardSpec]:
    """Repeatable: planning the same run again replaces its previous plan (nothing was inferred yet).

    `window` is the run's own (the DAG run's data interval); options may override it, or name tickets.
    A dry run records the run and its counts only, and returns no shards.

    The source is checked first (`Source.check`, through `Runtime.source`): a shape that cannot be read by
    instant and by key is refused with a ConfigError naming the column and the fix, before anything is
    written. Then the whole backlog (IDs, hashes and token estimates, never text) goes into temporary tables
    and is planned there (inference.store.planning), in one transaction: memory stays flat whatever the
    backlog's size. On PostgreSQL the database reads and hashes the window's rows itself where the source's
    shape allows (inference.store.source, "Hashes in the database"); the rest is read and hashed here.
    """
    options = options or RunOptions()
    window = options.window(window)
    with Runtime(settings, create=True) as rt:  # checks the source (Runtime.source) before creating our tables
        version = rt.model_version
        position = None
        if options.limit is not None:  # the lowest IDs in the source's own order (numbers numerically)
            with rt.engine.connect() as conn:
                if options.ticket_ids is None:
                    position = rt.source.order(conn, window=window)
                else:
                    position = rt.source.order(conn, keys=options.ticket_ids)
        with writing(rt.engine) as conn:
            runs.start_run(conn, run_id, window, version, options.as_dict())
            in_db = options.ticket_ids is None and rt.source.plans_in_db
            # the database reads and hashes the window's rows itself, but for the few Python must see
            found = planning.open_tables(conn, rt.source.window_plan_rows(window) if in_db else None)
            with rt.engine.connect() as read:  # read and hashed on a thread of its own while this one writes
                rows = _read_source(rt, read, window, options, rest=in_db)
                found += planning.add_source_pages(conn, prefetched(planning.source_pages(rows, conn.dialect.name)))
            duplicates = planning.keep_newest(conn)
            _judge_all(rt, conn, version, options, position)
            counts = planning.counts(conn, options.limit)
            n_shards = shard_count(
                counts.work_tokens, settings.shard_tokens, settings.max_shards, counts.work, options.shards
            )
            sizes: list[tuple[int, int, int]] = []
            if not options.dry_run:
                planning.write_items(conn, run_id, options.limit, n_shards, counts.work_tokens)
                sizes = planning.shard_sizes(conn, run_id)
                unsupported = [
                    Failure(t, digest, FailureKind.UNSUPPORTED_ID)
                    for t, digest in planning.unsupported(conn, options.limit)
                ]
                failures.record_failures(conn, run_id, version, unsupported, settings.max_attempts)
                # A ticket emptied since its result: that result describes text that no longer exists.
                retract_results(conn, planning.emptied(conn, options.limit))
            status = "dry_run" if options.dry_run else "running"
            runs.update_run(
                conn,
                run_id,
                backlog=counts.backlog,
                shards=n_shards if options.dry_run else len(sizes),
                status=status,
                source_duplicates=duplicates,
            )
        if not options.dry_run:
            bulk.analyze(rt.engine, inference_run_items)  # the shards page through these items next
        if options.ticket_ids is not None and found - duplicates < len(set(options.ticket_ids)):
            log.warning(
                "%d of %d requested ticket IDs do not exist",
                len(set(options.ticket_ids)) - (found - duplicates),
                len(options.ticket_ids),
            )
        log.info(
            "planned %srun %s window %s: %d tickets (%d to infer, %d empty, %d with an unsupported ID) in %d shards, "
            "model %s; %d duplicate source rows dropped (the newest version of each ticket kept)",
            "dry " if options.dry_run else "",
            run_id,
            window,
            counts.backlog,
            counts.work,
            counts.empty,
            counts.unsupported,
            n_shards if options.dry_run else len(sizes),
            version,
            duplicates,
        )
        if options.dry_run:
            return []
        return [ShardSpec(run_id, k, n, tokens) for k, n, tokens in sizes]


def _read_source(rt: Runtime, read, window: Window, options: RunOptions, rest: bool) -> Iterator[SourceRow]:
    """Every source row of the window (or of the named tickets), duplicates included; `rest`: those the
    database did not plan itself."""
    if options.ticket_ids is None:
        yield from rt.source.scan_window(read, window, rest=rest)
    else:
        yield from rt.source.scan_ids(read, options.ticket_ids)


def _judge_all(rt: Runtime, conn, version: str, options: RunOptions, position: dict[str, int] | None) -> None:
    """Named tickets are always recomputed (that is why they were named); a window only where needed."""
    force = options.reprocess or options.ticket_ids is not None
    planning.add_candidates(conn, version, force, rt.settings.max_seq_length, position)
