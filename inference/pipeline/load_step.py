"""load_results: validate staged outputs, upsert them by ticket ID, settle each item's state."""

from __future__ import annotations

from inference.config import Settings
from inference.heads.summary_batch import waiting_columns
from inference.modelinfo import model_id
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.records import Failure, FailureKind, LoadSummary, SkipReason
from inference.store import failures, items, runs, staging
from inference.store.db import utcnow, writing
from inference.store.results import current_versions, upsert_results
from inference.store.schema import ITEM_SKIPPED, ITEM_SUCCEEDED
from inference.validate import output_checker


@timed_step("load_results")
def load_results(settings: Settings, run_id: str) -> LoadSummary:
    with Runtime(settings) as rt:
        with rt.engine.connect() as conn:
            version = runs.get_run(conn, run_id).model_version
        return load_staged(rt, run_id, version)


def load_staged(rt: Runtime, run_id: str, version: str) -> LoadSummary:
    """Page by page (ticket_id order); each page commits as one transaction and leaves staging.

    Killed mid-way, a rerun finds only the pages not yet committed. Two loads at once converge:
    the second finds the results already current and counts them succeeded. A ticket edited after
    infer read it is not written: it fails as `stale_input` (retryable) and the retry reads the new text.
    """
    settings = rt.settings
    check, mid = output_checker(settings), model_id(settings.model_dir)
    waiting = waiting_columns(settings)  # filled in later by the Batch API step: such rows stay staged
    totals = LoadSummary(run_id)
    after = ""
    while True:
        with rt.engine.connect() as conn:
            page = staging.staged_page(conn, run_id, after, settings.chunk_size)
        if not page:
            break
        after = page[-1].ticket_id
        page = [r for r in page if all(r.outputs.get(c) is not None for c in waiting)]
        if not page:
            continue
        with rt.engine.connect() as conn:
            latest = rt.source.versions(conn, [r.ticket_id for r in page])
        now, valid, invalid, deleted = utcnow(), [], [], []
        for staged in page:
            if staged.ticket_id not in latest:
                deleted.append(staged.ticket_id)
                continue
            if latest[staged.ticket_id] > staged.source_updated_at:  # edited after infer read it
                invalid.append(Failure(staged.ticket_id, staged.content_hash, FailureKind.STALE_INPUT))
                continue
            reason = check(staged.to_row())
            if reason or staged.model_version != version:
                reason = reason or "staged by another model version"
                invalid.append(Failure(staged.ticket_id, staged.content_hash, FailureKind.INVALID_OUTPUT, reason))
                continue
            valid.append(staged.to_result_row(mid, now))
        with writing(rt.engine) as conn:
            written = upsert_results(conn, valid)
            rest = [r["ticket_id"] for r in valid if r["ticket_id"] not in written]
            stored = current_versions(conn, rest)
            mine = {r["ticket_id"]: (r["content_hash"], version) for r in valid}
            unchanged = [t for t in rest if stored.get(t) == mine[t]]
            superseded = [t for t in rest if stored.get(t) != mine[t]]
            items.set_items(conn, run_id, [*written, *unchanged], ITEM_SUCCEEDED, None)
            items.set_items(conn, run_id, superseded, ITEM_SKIPPED, SkipReason.SUPERSEDED)
            items.set_items(conn, run_id, deleted, ITEM_SKIPPED, SkipReason.DELETED)
            failures.resolve_failures(conn, [*written, *unchanged])
            failures.record_failures(conn, run_id, version, invalid, settings.max_attempts)
            staging.unstage(conn, run_id, [r.ticket_id for r in page])
        totals.add(LoadSummary(run_id, len(written), len(unchanged), len(superseded), len(invalid), len(deleted)))
    log.info(
        "run %s load: %d written, %d already current, %d superseded by newer results, %d invalid",
        run_id,
        totals.written,
        totals.unchanged,
        totals.superseded,
        totals.invalid,
    )
    return totals


def has_retries(settings: Settings, run_id: str) -> bool:
    """Whether some of the run's failures still wait for a retry (the DAG's branch decision)."""
    with Runtime(settings) as rt, rt.engine.connect() as conn:
        return failures.count_retryable(conn, run_id) > 0
