"""load_results: validate staged outputs, upsert them by ticket ID, settle each item's state."""

from __future__ import annotations

from inference.config import Settings
from inference.modelinfo import embedding_dim, model_id
from inference.pipeline.runtime import Runtime, log
from inference.records import Failure, FailureKind, SkipReason
from inference.store import runs
from inference.store.db import utcnow, writing
from inference.store.results import current_versions, upsert_results
from inference.store.schema import ITEM_SKIPPED, ITEM_SUCCEEDED
from inference.taxonomy import load_taxonomy
from inference.validate import check_output


def load_results(settings: Settings, run_id: str) -> dict:
    with Runtime(settings) as rt:
        with rt.engine.connect() as conn:
            version = runs.get_run(conn, run_id).model_version
        return load_staged(rt, run_id, version)


def load_staged(rt: Runtime, run_id: str, version: str) -> dict:
    """Page by page (ticket_id order); each page commits as one transaction and leaves staging.

    Killed mid-way, a rerun finds only the pages not yet committed. Two loads at once converge:
    the second finds the results already current and counts them succeeded. A ticket edited after
    infer read it is not written: it fails as `stale_input` (retryable) and the retry reads the new text.
    """
    settings = rt.settings
    dim, labels, mid = embedding_dim(settings.model_dir), set(load_taxonomy(settings)), model_id(settings.model_dir)
    totals = {"written": 0, "unchanged": 0, "superseded": 0, "invalid": 0, "deleted": 0}
    after = ""
    while True:
        with rt.engine.connect() as conn:
            page = runs.staged_page(conn, run_id, after, settings.chunk_size)
        if not page:
            break
        with rt.engine.connect() as conn:
            latest = rt.source.versions(conn, [row.ticket_id for row in page])
        now, valid, invalid, deleted = utcnow(), [], [], []
        for row in page:
            staged = dict(row._mapping)
            if row.ticket_id not in latest:
                deleted.append(row.ticket_id)
                continue
            if latest[row.ticket_id] > row.source_updated_at:  # edited after infer read it
                invalid.append(Failure(row.ticket_id, row.content_hash, FailureKind.STALE_INPUT))
                continue
            reason = check_output(staged, dim, labels, settings.heads)
            if reason or staged["model_version"] != version:
                reason = reason or "staged by another model version"
                invalid.append(Failure(row.ticket_id, row.content_hash, FailureKind.INVALID_OUTPUT, reason))
                continue
            del staged["created_at"]
            stored_dim = dim if staged["embedding"] is not None else None
            valid.append({**staged, "model_id": mid, "embedding_dim": stored_dim, "created_at": now, "updated_at": now})
        with writing(rt.engine) as conn:
            written = upsert_results(conn, valid)
            rest = [r["ticket_id"] for r in valid if r["ticket_id"] not in written]
            stored = current_versions(conn, rest)
            mine = {r["ticket_id"]: (r["content_hash"], version) for r in valid}
            unchanged = [t for t in rest if stored.get(t) == mine[t]]
            superseded = [t for t in rest if stored.get(t) != mine[t]]
            runs.set_items(conn, run_id, [*written, *unchanged], ITEM_SUCCEEDED, None)
            runs.set_items(conn, run_id, superseded, ITEM_SKIPPED, SkipReason.SUPERSEDED)
            runs.set_items(conn, run_id, deleted, ITEM_SKIPPED, SkipReason.DELETED)
            runs.resolve_failures(conn, [*written, *unchanged])
            runs.record_failures(conn, run_id, version, invalid, settings.max_attempts)
            runs.unstage(conn, run_id, [row.ticket_id for row in page])
        totals["written"] += len(written)
        totals["unchanged"] += len(unchanged)
        totals["superseded"] += len(superseded)
        totals["invalid"] += len(invalid)
        totals["deleted"] += len(deleted)
        after = page[-1].ticket_id
    log.info(
        "run %s load: %d written, %d already current, %d superseded by newer results, %d invalid",
        run_id,
        totals["written"],
        totals["unchanged"],
        totals["superseded"],
        totals["invalid"],
    )
    return {"run_id": run_id, **totals}


def pending_retries(settings: Settings, run_id: str) -> int:
    """How many of the run's failures still wait for a retry (the DAG's branch decision)."""
    with Runtime(settings) as rt, rt.engine.connect() as conn:
        return runs.count_retryable(conn, run_id)
