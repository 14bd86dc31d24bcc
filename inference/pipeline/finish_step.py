"""finish_run: reconcile the run's accounting and decide whether the run succeeded."""

from __future__ import annotations

from inference.config import Settings
from inference.errors import RunFailed
from inference.pipeline.runtime import Runtime, log
from inference.store import items, runs
from inference.store.db import utcnow, writing
from inference.store.schema import ITEM_FAILED, ITEM_PLANNED, ITEM_SKIPPED, ITEM_STAGED, ITEM_SUCCEEDED


def finish_run(settings: Settings, run_id: str) -> dict:
    """backlog = succeeded + failed + skipped, each ticket in exactly one state, every success backed
    by a result row; and failed / backlog <= INFERENCE_MAX_FAILURE_RATE. Otherwise the run fails."""
    with Runtime(settings) as rt:
        with writing(rt.engine) as conn:
            run = runs.get_run(conn, run_id)
            if run.status == "dry_run":
                runs.update_run(conn, run_id, finished_at=utcnow())
                return _dry_summary(run)
            counts = items.item_counts(conn, run_id)
            reasons = items.skip_reasons(conn, run_id)
            missing_results = runs.succeeded_without_result(conn, run_id)
            backlog = sum(counts.values())
            succeeded, failed, skipped = (counts.get(k, 0) for k in (ITEM_SUCCEEDED, ITEM_FAILED, ITEM_SKIPPED))
            unfinished = counts.get(ITEM_PLANNED, 0) + counts.get(ITEM_STAGED, 0)
            error = None
            if unfinished or succeeded + failed + skipped != backlog:
                error = f"reconciliation failed: {unfinished} of {backlog} tickets have no final state"
            elif missing_results:
                error = f"reconciliation failed: {missing_results} succeeded tickets have no result row"
            elif backlog and failed / backlog > settings.max_failure_rate:
                error = (
                    f"failure rate {failed / backlog:.2%} ({failed} of {backlog}) is above "
                    f"INFERENCE_MAX_FAILURE_RATE={settings.max_failure_rate:.2%}"
                )
            finished = utcnow()
            runs.update_run(
                conn,
                run_id,
                status="failed" if error else "succeeded",
                backlog=backlog,
                succeeded=succeeded,
                failed=failed,
                skipped=skipped,
                finished_at=finished,
                error=error,
            )
        wall = (finished - run.planned_at).total_seconds()
        summary = {
            "run_id": run_id,
            "status": "failed" if error else "succeeded",
            "window_start": run.window_start.isoformat(),
            "window_end": run.window_end.isoformat(),
            "model_version": run.model_version,
            "backlog": backlog,
            "succeeded": succeeded,
            "failed": failed,
            "skipped": skipped,
            "reasons": reasons,
            "shards": run.shards,
            "real_tokens": run.real_tokens,
            "padded_tokens": run.padded_tokens,
            "padding_efficiency": round(run.real_tokens / run.padded_tokens, 4) if run.padded_tokens else None,
            "model_seconds": round(run.device_seconds, 3),
            "wall_seconds": round(wall, 3),
            "tickets_per_second": round(backlog / wall, 2) if wall > 0 else None,
        }
        log.info("run %s finished: %s", run_id, summary)
        if error:
            raise RunFailed(f"run {run_id}: {error}", {**summary, "error": error})
        return summary


def _dry_summary(run) -> dict:
    log.info("dry run %s: %d tickets would be processed in %d shards", run.run_id, run.backlog, run.shards)
    return {
        "run_id": run.run_id,
        "status": "dry_run",
        "window_start": run.window_start.isoformat(),
        "window_end": run.window_end.isoformat(),
        "model_version": run.model_version,
        "backlog": run.backlog,
        "shards": run.shards,
        "succeeded": 0,
        "failed": 0,
        "skipped": 0,
    }
