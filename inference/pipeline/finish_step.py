"""finish_run: reconcile the run's accounting and decide whether the run succeeded."""

from __future__ import annotations

from inference.batchapi.step import cost_summary
from inference.config import Settings
from inference.errors import RunFailed
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.report.timing import cost_per_1000, per_second, spans, timing
from inference.store import items, metrics, runs
from inference.store.db import utcnow, writing
from inference.store.schema import ITEM_FAILED, ITEM_PLANNED, ITEM_SKIPPED, ITEM_STAGED, ITEM_SUCCEEDED


@timed_step("finish_run")
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
            steps = timing(spans(metrics.steps(conn, run_id)))
            model_tickets = metrics.model_tickets(conn, run_id)
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
        model_wall = steps.model_wall_seconds
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
            # Throughput over the time a model task was running (not queued for the pool, not plan or load)
            "model_tickets": model_tickets,
            "model_wall_seconds": round(model_wall, 3),
            "tickets_per_second": per_second(model_tickets, model_wall),
            "tokens_per_second": per_second(run.real_tokens, model_wall),
            "device_seconds": round(steps.device_seconds, 3),
            "cost_per_1000_tickets": cost_per_1000(steps.device_seconds, model_tickets, settings.device_hour_price),
        }
        with rt.engine.connect() as conn:  # the Batch API's tokens and cost, next to the device-seconds
            summary.update(cost_summary(conn, run_id, settings))
        _log_summary(summary)
        if error:
            raise RunFailed(f"run {run_id}: {error}", {**summary, "error": error})
        return summary


def _log_summary(summary: dict) -> None:
    """A few short lines instead of one long dict (the Airflow UI cuts long lines)."""

    def n(key: str) -> str:
        value = summary.get(key)
        return "-" if value is None else f"{value:,}"

    log.info("run %s finished: %s", summary["run_id"], summary["status"])
    log.info("window %s .. %s, model %s", summary["window_start"], summary["window_end"], summary["model_version"])
    log.info(
        "tickets: %s backlog = %s succeeded + %s failed + %s skipped %s",
        n("backlog"),
        n("succeeded"),
        n("failed"),
        n("skipped"),
        summary["reasons"] or "",
    )
    efficiency = summary["padding_efficiency"]
    log.info(
        "model: %s tickets, %s tokens in %ss of model time over %ss of model-task wall time "
        "(%s tickets/s, %s tokens/s, padding efficiency %s)",
        n("model_tickets"),
        n("real_tokens"),
        n("model_seconds"),
        n("model_wall_seconds"),
        n("tickets_per_second"),
        n("tokens_per_second"),
        "-" if efficiency is None else f"{efficiency:.1%}",
    )
    cost = summary["cost_per_1000_tickets"]
    log.info(
        "device time %ss%s; run wall time %ss; report: python -m inference report %s",
        n("device_seconds"),
        "" if cost is None else f", cost per 1,000 tickets {cost:.4f}",
        n("wall_seconds"),
        summary["run_id"],
    )


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
