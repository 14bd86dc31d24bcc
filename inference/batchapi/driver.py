"""The backend's rounds in one process (the CLI, tests): what the DAG does across tasks, with sleeps
where the DAG defers to the triggerer.

    submit -> wait until every batch ended -> collect -> load -> again for the pending failures

Each round counts an attempt on its requests, so the failures of the last allowed attempt are
dead-lettered and the loop ends. Past the wait deadline (the provider's expiry plus the grace) the
overdue batches are cancelled; if they still have not ended one grace later they are abandoned.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from inference.batchapi.client import BatchClient
from inference.batchapi.collect import abandon_parts, cancel_overdue, collect_run
from inference.batchapi.submit import BatchContext, submit_run, wait_deadline
from inference.store.db import utcnow

log = logging.getLogger("inference.batchapi")


@dataclass
class DriveSummary:
    run_id: str
    rounds: int = 0
    parts: list[int] = field(default_factory=list)
    replies: int = 0
    failed: int = 0
    cancelled: list[int] = field(default_factory=list)
    abandoned: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def run_batches(
    ctx: BatchContext,
    client: BatchClient,
    run_id: str,
    load: Callable[[], object],
    *,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], dt.datetime] = utcnow,
) -> DriveSummary:
    """Rounds until nothing waits for a request; `load` is the pipeline's load_results for this run."""
    summary = DriveSummary(run_id)
    grace = dt.timedelta(seconds=ctx.settings.deadline_grace_seconds)
    while submit_run(ctx, client, run_id):
        summary.rounds += 1
        deadline, cancelled_at = wait_deadline(ctx.engine, run_id, ctx.settings.deadline_grace_seconds), None
        while True:
            collected = collect_run(ctx, client, run_id)
            summary.parts += collected.collected
            summary.replies += collected.replies
            summary.failed += collected.failed
            if collected.done:
                break
            if deadline is not None and now() > deadline:
                if cancelled_at is None:
                    summary.cancelled += cancel_overdue(ctx, client, run_id)
                    cancelled_at = now()
                elif now() > cancelled_at + grace:
                    summary.abandoned += abandon_parts(ctx, run_id, collected.waiting)
                    continue
            sleep(ctx.settings.poll_seconds)
        load()
    log.info("run %s: batch rounds done: %s", run_id, summary.as_dict())
    return summary
