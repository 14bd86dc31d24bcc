"""Collecting ended batches: download, match by custom_id, stage replies, record typed failures.

A part is collected in one transaction under its row lock: every member ends as a staged reply (which
`load_results` then validates and upserts with the usual guards) or as a typed failure (which goes down
the usual retry branch and dead-letters after INFERENCE_MAX_ATTEMPTS). Only items still waiting take an
outcome, and a collected part is never collected again, so a second copy, a rerun after a kill, or a
late duplicate changes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass, field

from inference.batchapi.client import BatchClient, BatchInfo
from inference.batchapi.requestfile import private_dir, version_tag
from inference.batchapi.resultfile import PartOutcome, ResultReader
from inference.batchapi.submit import BatchContext
from inference.records import Failure, FailureKind, StagedResult
from inference.store import batches, failures, items, runs, staging
from inference.store.batch_tables import PART_COLLECTED, PART_SUBMITTED
from inference.store.db import utcnow, writing
from inference.store.schema import FAILURE_PENDING, ITEM_STAGED

log = logging.getLogger("inference.batchapi")
RESULT = "result"  # a member's outcome when its reply was staged
SUMMARY_COLUMN = "summary"


@dataclass
class CollectSummary:
    run_id: str
    collected: list[int] = field(default_factory=list)  # parts collected by this call
    waiting: list[int] = field(default_factory=list)  # parts whose batch has not ended yet
    replies: int = 0
    failed: int = 0
    ignored_lines: int = 0

    @property
    def done(self) -> bool:
        return not self.waiting

    def as_dict(self) -> dict:
        return asdict(self)


def refresh(ctx: BatchContext, client: BatchClient, run_id: str) -> list[tuple[int, BatchInfo]]:
    """The provider's view of every submitted part, recorded (status, file IDs, end time)."""
    with ctx.engine.connect() as conn:
        rows = batches.parts(conn, run_id, [PART_SUBMITTED])
    seen = []
    for row in rows:
        info = client.retrieve(row.provider_batch_id)
        with writing(ctx.engine) as conn:
            batches.update_part(
                conn,
                run_id,
                row.part,
                only_in=PART_SUBMITTED,
                provider_status=info.status,
                expires_at=info.expires_at,
                finished_at=info.finished_at,
                output_file_id=info.output_file_id,
                error_file_id=info.error_file_id,
            )
        seen.append((row.part, info))
    return seen


def collect_run(ctx: BatchContext, client: BatchClient, run_id: str) -> CollectSummary:
    """Collects every submitted part whose batch has ended; the rest are reported as waiting."""
    summary = CollectSummary(run_id)
    for part, info in refresh(ctx, client, run_id):
        if not info.terminal:
            summary.waiting.append(part)
            continue
        outcome = download_and_read(ctx, client, run_id, part, info)
        if apply_outcome(ctx, run_id, part, outcome, info.status, info.input_tokens, info.output_tokens):
            summary.collected.append(part)
            summary.replies += len(outcome.replies)
            summary.failed += len(outcome.failures)
            summary.ignored_lines += outcome.counts.ignored
            if ctx.settings.delete_files:
                for file_id in (info.input_file_id, info.output_file_id, info.error_file_id):
                    if file_id:
                        client.delete_file(file_id)
    return summary


def download_and_read(ctx: BatchContext, client: BatchClient, run_id: str, part: int, info: BatchInfo) -> PartOutcome:
    """Streams the output and error files to private temporary files, then reads them line by line."""
    reader = reader_for(ctx, run_id, [part])
    with private_dir() as tmp:
        for name, file_id in (("output", info.output_file_id), ("errors", info.error_file_id)):
            if not file_id:
                continue
            path = tmp / f"{name}.jsonl"
            client.download(file_id, path)
            with path.open("rb") as fh:
                reader.feed_all(fh)
    outcome = reader.finish(info.status)
    c = outcome.counts
    log.info(
        "run %s part %d (batch %s, %s): %d replies, %d failures; lines: %d read, %d duplicate, %d unknown, "
        "%d malformed, %d requests missing",
        run_id,
        part,
        info.id,
        info.status,
        len(outcome.replies),
        len(outcome.failures),
        c.lines,
        c.duplicates,
        c.unknown,
        c.malformed,
        c.missing,
    )
    if info.error_codes:
        log.warning("run %s part %d: the provider reports batch errors with codes %s", run_id, part, info.error_codes)
    return outcome


def reader_for(ctx: BatchContext, run_id: str, parts: list[int]) -> ResultReader:
    """A reader expecting exactly these parts' members (ticket -> the hash of the text that was sent)."""
    with ctx.engine.connect() as conn:
        version = runs.get_run(conn, run_id).model_version
        expected = {m.ticket_id: m.content_hash for p in parts for m in batches.members(conn, run_id, p)}
    return ResultReader(expected, version_tag(version))


def apply_outcome(
    ctx: BatchContext,
    run_id: str,
    part: int,
    outcome: PartOutcome,
    provider_status: str,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> bool:
    """Stages the part's replies and records its failures, all in one transaction; False when the part
    was already collected (by another copy, or an earlier try) and nothing was done."""
    now = utcnow()
    with writing(ctx.engine) as conn:
        row = batches.lock_part(conn, run_id, part)
        if row.state == PART_COLLECTED:
            return False
        version = runs.get_run(conn, run_id).model_version
        members = {m.ticket_id: m for m in batches.members(conn, run_id, part)}
        open_ = batches.lock_waiting(conn, run_id, list(members), ctx.after_encoder)
        replies = {t: r for t, r in outcome.replies.items() if t in members}
        fails = [f for f in outcome.failures if f.ticket_id in members]
        if ctx.after_encoder:
            stale = _fill(conn, run_id, members, {t: r for t, r in replies.items() if t in open_})
            replies = {t: r for t, r in replies.items() if t not in {f.ticket_id for f in stale}}
            fails += stale
        else:
            staged = [
                _staged(run_id, members[t], reply.summary, reply.input_tokens, version, now)
                for t, reply in sorted(replies.items())
                if t in open_
            ]
            staging.stage(conn, staged)
            items.set_items(conn, run_id, [r.ticket_id for r in staged], ITEM_STAGED, None)
        statuses = failures.record_failures(
            conn, run_id, version, [f for f in fails if f.ticket_id in open_], ctx.max_attempts
        )
        if ctx.after_encoder:  # a pending failure keeps its encoder outputs staged for the next round
            staging.unstage(conn, run_id, [t for t, status in statuses.items() if status != FAILURE_PENDING])
        batches.set_outcomes(
            conn,
            run_id,
            part,
            [
                dict(ticket_id=t, outcome=RESULT, input_tokens=r.input_tokens, output_tokens=r.output_tokens)
                for t, r in replies.items()
            ]
            + [dict(ticket_id=f.ticket_id, outcome=str(f.kind), input_tokens=None, output_tokens=None) for f in fails],
        )
        batches.update_part(
            conn,
            run_id,
            part,
            state=PART_COLLECTED,
            provider_status=provider_status,
            collected_at=now,
            finished_at=row.finished_at or now,
            succeeded=len(replies),
            failed=len(fails),
            ignored_lines=outcome.counts.ignored,
            input_tokens=outcome.input_tokens if input_tokens is None else input_tokens,
            output_tokens=outcome.output_tokens if output_tokens is None else output_tokens,
        )
    return True


def _fill(conn, run_id: str, members: dict, replies: dict) -> list[Failure]:
    """After the encoder: each reply fills the summary of the row staged from the very text it was asked
    for. A reply whose row holds other text (edited in between) fails `stale_input`, and that row goes."""
    filled = batches.fill_summaries(
        conn, run_id, [(t, members[t].content_hash, reply.summary) for t, reply in sorted(replies.items())]
    )
    items.set_items(conn, run_id, sorted(filled), ITEM_STAGED, None)  # a resent summary: failed -> staged
    stale = [Failure(t, members[t].content_hash, FailureKind.STALE_INPUT) for t in sorted(set(replies) - filled)]
    staging.unstage(conn, run_id, [f.ticket_id for f in stale])
    return stale


def _staged(run_id: str, member, summary: str, input_tokens: int | None, version: str, now: dt.datetime):
    return StagedResult(
        run_id=run_id,
        ticket_id=member.ticket_id,
        content_hash=member.content_hash,
        source_updated_at=member.source_updated_at,
        model_version=version,
        truncated=member.truncated,
        input_tokens=input_tokens or max(1, member.est_tokens),
        created_at=now,
        outputs={SUMMARY_COLUMN: summary},
    )


def cancel_overdue(ctx: BatchContext, client: BatchClient, run_id: str) -> list[int]:
    """Past the wait deadline: asks the provider to cancel every batch of the run that has not ended.
    A cancelled batch still returns what it finished; `collect_run` then treats the rest as expired."""
    asked = []
    for part, info in refresh(ctx, client, run_id):
        if not info.terminal and info.status != "cancelling":
            client.cancel(info.id)
            asked.append(part)
    if asked:
        log.warning("run %s: cancelled the overdue batches of parts %s", run_id, asked)
    return asked


def abandon_parts(ctx: BatchContext, run_id: str, parts: list[int]) -> int:
    """Last resort for batches that never end (not even after a cancel): every member fails as
    `batch_expired` and goes down the retry branch; a late result of such a batch is never read."""
    abandoned = 0
    for part in parts:
        outcome = reader_for(ctx, run_id, [part]).finish("expired")
        if apply_outcome(ctx, run_id, part, outcome, "abandoned"):
            abandoned += 1
            log.warning(
                "run %s: abandoned part %d; its %d requests will be retried", run_id, part, len(outcome.failures)
            )
    return abandoned
