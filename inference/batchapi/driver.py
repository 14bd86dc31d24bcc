"""The backend's rounds as one state machine, `advance`, that two drivers share: the deferrable Airflow task
(which waits in the triggerer between two calls, plugins/inference_airflow/batch_task.py) and `run_batches`
(one process, sleeping in between: the CLI, tests).

    collect every ended batch -> load what is complete -> submit what waits for a summary -> wait -> ...

Each round counts an attempt on its resent requests, so the failures of the last allowed attempt are
dead-lettered and the rounds end. Past the wait deadline (the provider's expiry plus the grace) the
overdue batches are cancelled; if they still have not ended one grace later they are abandoned.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from inference.batchapi.client import BatchClient
from inference.batchapi.collect import CollectSummary, abandon_parts, cancel_overdue, collect_run
from inference.batchapi.submit import BatchContext, PartRef, open_parts, submit_run, wait_deadline
from inference.store.db import utcnow

log = logging.getLogger("inference.batchapi")
COMPLETION_WINDOW = dt.timedelta(hours=24)  # when a provider reports no expiry


@dataclass(frozen=True)
class Wait:
    """What to wait for before the next `advance`: these batches ending, at the latest until `deadline`.
    `cancelled`: they were cancelled for being overdue already, so the next deadline abandons them.
    Goes through XCom / the trigger as `as_dict()`: IDs and times only."""

    run_id: str
    batch_ids: tuple[str, ...]
    deadline: dt.datetime
    cancelled: bool = False

    def as_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "batch_ids": list(self.batch_ids),
            "deadline": self.deadline.isoformat(),
            "cancelled": self.cancelled,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Wait:
        deadline = dt.datetime.fromisoformat(data["deadline"])
        return cls(data["run_id"], tuple(data["batch_ids"]), deadline, bool(data["cancelled"]))


@dataclass
class Step:
    """What one `advance` did, and what to wait for next (None: every summary of the run is settled)."""

    collected: CollectSummary
    cancelled: list[int] = field(default_factory=list)
    abandoned: int = 0
    submitted: list[PartRef] = field(default_factory=list)  # a new round's parts
    wait: Wait | None = None


def advance(
    ctx: BatchContext,
    client: BatchClient,
    run_id: str,
    load: Callable[[], object],
    *,
    waited: Wait | None = None,
    overdue: bool | None = None,
    now: Callable[[], dt.datetime] = utcnow,
) -> Step:
    """Takes the run as far as it goes without waiting. Repeatable: a rerun after a crash (or a second
    copy) collects nothing twice and submits nothing twice, and waits for the same batches.

    `waited`: the wait this call ends (None: the first call, or a restart), whose deadline decides
    whether the batches still running are overdue (`overdue`: what the waiting trigger saw instead)."""
    ctx.ensure_tables()
    step = Step(collect_run(ctx, client, run_id))
    if overdue is None:
        overdue = waited is not None and now() > waited.deadline
    if step.collected.waiting:
        if not overdue:
            step.wait = _wait(ctx, run_id, waited, now)
            return step
        if waited is None or not waited.cancelled:
            step.cancelled = cancel_overdue(ctx, client, run_id)
            grace = dt.timedelta(seconds=ctx.settings.deadline_grace_seconds)
            step.wait = _wait(ctx, run_id, Wait(run_id, (), now() + grace, cancelled=True), now)
            return step
        step.abandoned = abandon_parts(ctx, run_id, step.collected.waiting)
    load()
    step.submitted = submit_run(ctx, client, run_id)
    if step.submitted:
        step.wait = _wait(ctx, run_id, None, now)
    return step


def _wait(ctx: BatchContext, run_id: str, waited: Wait | None, now) -> Wait:
    """The run's open batches, until the deadline of the wait in progress, else the provider's expiry plus
    the grace (an absolute time: a restart keeps it)."""
    batch_ids = tuple(r.batch_id for r in open_parts(ctx.engine, run_id) if r.batch_id)
    if waited is not None:
        return Wait(run_id, batch_ids, waited.deadline, waited.cancelled)
    grace = ctx.settings.deadline_grace_seconds
    deadline = wait_deadline(ctx.engine, run_id, grace) or now() + COMPLETION_WINDOW + dt.timedelta(seconds=grace)
    return Wait(run_id, batch_ids, deadline)


@dataclass
class DriveSummary:
    run_id: str
    rounds: int = 0
    parts: list[int] = field(default_factory=list)
    replies: int = 0
    failed: int = 0
    cancelled: list[int] = field(default_factory=list)
    abandoned: int = 0

    def add(self, step: Step) -> None:
        self.rounds += 1 if step.submitted else 0
        self.parts += step.collected.collected
        self.replies += step.collected.replies
        self.failed += step.collected.failed
        self.cancelled += step.cancelled
        self.abandoned += step.abandoned

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
    step = advance(ctx, client, run_id, load, now=now)
    summary.add(step)
    while step.wait is not None:
        sleep(ctx.settings.poll_seconds)
        step = advance(ctx, client, run_id, load, waited=step.wait, now=now)
        summary.add(step)
    log.info("run %s: batch rounds done: %s", run_id, summary.as_dict())
    return summary
