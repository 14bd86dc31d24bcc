"""finish_run: reconcile the run's accounting and decide whether the run succeeded."""

from __future__ import annotations

from inference.batchapi.step import cost_summary
from inference.config import Settings
from inference.errors import RunFailed
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.report.timing import cost_per_1000, per_second, spans, timing, union_seconds
from inference.store import items, metrics, runs, staging
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
            orphans = staging.staged_without_item(conn, run_id)
            steps = timing(spans(metrics.steps(conn, run_id)))
            model_tickets = metrics.model_tickets(conn, run_id)
            processing = union_seconds(metrics.processing_intervals(conn, run_id))
            backlog = sum(counts.values())
            succeeded, failed, skipped = (counts.get(k, 0) for k in (ITEM_SUCCEEDED, ITEM_FAILED, ITEM_SKIPPED))
            unfinished = counts.get(ITEM_PLANNED, 0) + counts.get(ITEM_STAGED, 0)
            error, remedy, by_shard, unloaded = None, None, {}, 0
            if unfinished or succeeded + failed + skipped != backlog:
                by_shard, unloaded = items.unfinished_by_shard(conn, run_id)
                error = f"reconciliation failed: {unfinished} of {backlog} tickets have no final state"
                if by_shard or unloaded:
                    error += f" ({_unfinished_text(by_shard, unloaded)})"
                    remedy = _unfinished_remedy(by_shard, unloaded)
            elif missing_results:
                error = f"reconciliation failed: {missing_results} succeeded tickets have no result row"
            elif orphans:
                error = f"reconciliation failed: {orphans} staged results have no run item (never written)"
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
        busy = processing or model_wall  # while a model task worked on chunks: not queued, not loading the model
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
            "source_duplicates": run.source_duplicates,
            "retracted": run.retracted,
            "shards": run.shards,
            "real_tokens": run.real_tokens,
            "padded_tokens": run.padded_tokens,
            "padding_efficiency": round(run.real_tokens / run.padded_tokens, 4) if run.padded_tokens else None,
            "model_seconds": round(run.device_seconds, 3),
            "wall_seconds": round(wall, 3),
            # Throughput over the time a model task worked on chunks (not queued for the pool, not loading the
            # model, not plan or load)
            "model_tickets": model_tickets,
            "model_wall_seconds": round(model_wall, 3),
            "processing_seconds": round(busy, 3),
            "tickets_per_second": per_second(model_tickets, busy),
            "tokens_per_second": per_second(run.real_tokens, busy),
            "device_seconds": round(steps.device_seconds, 3),
            "cost_per_1000_tickets": cost_per_1000(steps.device_seconds, model_tickets, settings.device_hour_price),
        }
        with rt.engine.connect() as conn:  # the Batch API's tokens and cost, next to the device-seconds
            summary.update(cost_summary(conn, run_id, settings))
        if by_shard:
            summary["unfinished_shards"] = {str(k): n for k, n in by_shard.items()}
        if unloaded:
            summary["unloaded"] = unloaded
        summary["housekeeping"] = _housekeeping(rt, run_id)
        _log_summary(summary)
        if error:
            raise RunFailed(f"run {run_id}: {error}", {**summary, "error": error}, remedy=remedy)
        return summary


def _task(shard: int) -> str:
    return f"infer_shard[{shard}]" if shard >= 0 else "retry_failed"


def _unfinished_text(by_shard: dict[int, int], unloaded: int) -> str:
    parts = [f"{_task(k)}: {n} not inferred" for k, n in by_shard.items()]
    if unloaded:
        parts.append(f"load_results: {unloaded} staged, not loaded")
    return ", ".join(parts)


def _unfinished_remedy(by_shard: dict[int, int], unloaded: int) -> str:
    """The fixed "what to do" for tickets left without a final state, naming the tasks to clear."""
    tasks = [_task(k) for k in by_shard] + (["load_results"] if unloaded else [])
    named = ", ".join(tasks)
    advice = "see its log"
    if by_shard:
        advice += (
            "; a model task killed on every try without an error of its own was most likely killed for memory: "
            "trigger the run again with a lower max_batch_tokens param, or give the worker more memory"
        )
    return f"{named} did not finish ({advice}), then clear {named} and finish_run; committed work is kept"


def _housekeeping(rt: Runtime, run_id: str) -> dict:
    """Abandoned runs and retention (inference.store.retention); a failure here never fails the run."""
    from inference.store.retention import housekeeping

    try:
        done = housekeeping(
            rt.engine,
            retention_days=rt.settings.retention_days,
            abandoned_after_hours=rt.settings.abandoned_after_hours,
            by=run_id,
        )
    except Exception as exc:  # noqa: BLE001 - logged with its scrubbed text; the run's own result stands
        log.error("housekeeping failed (%s): %s; the next run tries again", type(exc).__name__, exc)
        return {"error": type(exc).__name__}
    return done.as_dict()


def mark_failed(settings: Settings, run_id: str, exc: BaseException) -> bool:
    """Best effort, after a step raised outside Airflow (the CLI): a planned or running run is marked failed
    with the error's class and fixed "why", so it does not stay `running`. False when that could not be
    written (the database is down or full): the next run's housekeeping marks it once abandoned."""
    import sqlalchemy as sa

    from inference.errors import why_of
    from inference.store.db import database_error, make_engine
    from inference.store.retention import ACTIVE
    from inference.store.schema import inference_runs

    cause = database_error(exc) or exc
    error = f"{type(cause).__name__}: {why_of(cause)}"[:500]
    engine = make_engine(settings.db_url)
    try:
        with writing(engine) as conn:
            r = inference_runs.c
            done = conn.execute(
                sa.update(inference_runs)
                .where(r.run_id == run_id, r.status.in_(ACTIVE))
                .values(status="failed", finished_at=utcnow(), error=error)
            ).rowcount
        return bool(done)
    except Exception as failed:  # noqa: BLE001 - the original error is what the caller reports
        log.error("could not mark run %s failed (%s); the next run will", run_id, type(failed).__name__)
        return False
    finally:
        engine.dispose()


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
        "model: %s tickets, %s tokens in %ss of model time over %ss of chunk processing "
        "(%s tickets/s, %s tokens/s, padding efficiency %s)",
        n("model_tickets"),
        n("real_tokens"),
        n("model_seconds"),
        n("processing_seconds"),
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
