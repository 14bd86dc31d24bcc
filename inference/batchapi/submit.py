"""Submitting a run's requests: plan parts, upload, create batches, each step recorded before the next.

A part's life: `prepared` (members and a random marker recorded, attempts counted) -> `uploaded`
(input file ID recorded) -> `submitted` (provider batch ID recorded). A task killed anywhere resumes
from the recorded state: a prepared part is rebuilt from its members with their current text, an
uploaded part first looks for a batch carrying its marker (the create may have happened before the
kill), and a submitted part is only waited for. A second copy of the task waits on the same row locks
and finds the work done; no part is ever submitted twice.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from inference.batchapi.client import BatchApiUnavailable, BatchClient, BatchInfo
from inference.batchapi.requestfile import Request, build_request, open_private, private_dir, split_parts
from inference.batchapi.settings import BatchSettings
from inference.records import Failure, FailureKind, SkipReason
from inference.store import batches, failures, items, runs, staging
from inference.store.batch_tables import (
    PART_COLLECTED,
    PART_EXPORTED,
    PART_PREPARED,
    PART_SUBMITTED,
    PART_UPLOADED,
    create_batch_tables,
)
from inference.store.db import utcnow, writing
from inference.store.schema import ITEM_FAILED, ITEM_SKIPPED
from inference.store.source import Source

log = logging.getLogger("inference.batchapi")
PAGE = 1000
FIND_LOOKBACK_SECONDS = 3600  # how far before the part's intent a batch with its marker may have been created


@dataclass(frozen=True)
class BatchContext:
    """What every backend step needs; `max_attempts` is INFERENCE_MAX_ATTEMPTS (dead-letter bound).

    `after_encoder`: other heads are configured, so the encoder pass has staged their outputs with the
    summary missing; requests go out for those staged rows (the text the encoder saw) and replies fill
    them in. Otherwise the summary is the only output: requests go out for the planned items and replies
    are staged as whole rows."""

    engine: sa.Engine
    source: Source
    settings: BatchSettings
    max_attempts: int = 3
    after_encoder: bool = False

    def ensure_tables(self) -> None:
        create_batch_tables(self.engine)


@dataclass(frozen=True)
class PartRef:
    """What goes through XCom: IDs only."""

    run_id: str
    part: int
    batch_id: str | None
    state: str

    def as_dict(self) -> dict:
        return {"run_id": self.run_id, "part": self.part, "batch_id": self.batch_id, "state": self.state}


def prepare_parts(ctx: BatchContext, run_id: str, mode: str = "api") -> list[int]:
    """Assigns every item waiting for a request (planned, or failed with a retry pending) to new parts
    under the limits, one transaction per part. Retry rounds use the smaller retry limit."""
    new: list[int] = []
    while (part := _prepare_one(ctx, run_id, mode)) is not None:
        new.append(part)
    return new


@dataclass(frozen=True)
class _Waiting:
    """An item waiting for a request: its batch round, whether sending it counts an attempt, and (after
    the encoder) the text its staged outputs were computed from."""

    ticket_id: str
    round: int
    claim: bool
    staged: tuple[str, dt.datetime] | None = None  # (content_hash, source_updated_at)


def _waiting_page(ctx: BatchContext, conn: sa.Connection, run_id: str, after: str) -> list[_Waiting]:
    if not ctx.after_encoder:  # each submission is an attempt: it is all the work the item gets
        return [_Waiting(t, n, True) for t, n in batches.sendable_items(conn, run_id, after, PAGE)]
    # The encoder pass already counted the item's attempt; resending a failed summary counts another.
    return [
        _Waiting(r.ticket_id, r.rounds, r.status == ITEM_FAILED, (r.content_hash, r.source_updated_at))
        for r in batches.summaries_to_send(conn, run_id, after, PAGE)
    ]


def _prepare_one(ctx: BatchContext, run_id: str, mode: str) -> int | None:
    settings = ctx.settings
    with writing(ctx.engine) as conn:
        batches.lock_run(conn, run_id)
        version = runs.get_run(conn, run_id).model_version
        part = batches.next_part(conn, run_id)
        chosen: list[Request] = []
        claimed: list[str] = []
        skipped: dict[SkipReason, list[str]] = {}
        stale: list[Failure] = []
        after, retry_round, limit, size = "", 0, settings.max_requests, 0
        while True:
            page = _waiting_page(ctx, conn, run_id, after)
            if not page:
                break
            if not chosen and not skipped and not stale:  # the part's round (retries: smaller parts)
                retry_round = max(w.round for w in page)
                limit = settings.part_limit(retry_round)
            current = ctx.source.by_ids(conn, [w.ticket_id for w in page])
            full = False
            for waiting in page:
                ticket = current.get(waiting.ticket_id)
                built = build_request(ticket, settings, version) if ticket else SkipReason.DELETED
                if isinstance(built, SkipReason):
                    skipped.setdefault(built, []).append(waiting.ticket_id)
                    continue
                request = built[0]
                if waiting.staged is not None and waiting.staged != (request.content_hash, request.source_updated_at):
                    # edited since the encoder read it: a summary of the new text would not match its outputs
                    stale.append(Failure(waiting.ticket_id, waiting.staged[0], FailureKind.STALE_INPUT))
                    continue
                if chosen and (len(chosen) >= limit or size + request.size > settings.max_bytes):
                    full = True
                    break
                split_parts([request], limit, settings.max_bytes)  # refuses a request larger than a file
                chosen.append(request)
                if waiting.claim:
                    claimed.append(waiting.ticket_id)
                size += request.size
            if full:
                break
            after = page[-1].ticket_id
        for reason, ids in skipped.items():
            _skip(ctx, conn, run_id, ids, reason)
        _fail_stale(ctx, conn, run_id, version, stale)
        if not chosen:
            return None
        now = utcnow()
        batches.add_part(
            conn,
            dict(
                run_id=run_id,
                part=part,
                retry_round=retry_round,
                marker=uuid.uuid4().hex,
                mode=mode,
                state=PART_PREPARED,
                request_count=len(chosen),
                request_bytes=sum(r.size for r in chosen),
                created_at=now,
            ),
            [
                dict(
                    run_id=run_id,
                    part=part,
                    ticket_id=r.ticket_id,
                    content_hash=r.content_hash,
                    source_updated_at=r.source_updated_at,
                    truncated=r.truncated,
                    est_tokens=r.est_tokens,
                )
                for r in chosen
            ],
        )
        items.claim(conn, run_id, claimed)  # an attempt per submission (after the encoder: per resubmission)
    log.info("run %s: part %d (round %d) holds %d requests", run_id, part, retry_round, len(chosen))
    return part


def _skip(ctx: BatchContext, conn: sa.Connection, run_id: str, ids: list[str], reason: SkipReason) -> None:
    """Deleted or emptied since planning: no request; after the encoder, its staged outputs go too."""
    open_ = batches.lock_waiting(conn, run_id, ids, ctx.after_encoder)
    gone = [t for t in ids if t in open_]
    items.set_items(conn, run_id, gone, ITEM_SKIPPED, reason)
    if ctx.after_encoder:
        staging.unstage(conn, run_id, gone)


def _fail_stale(ctx: BatchContext, conn: sa.Connection, run_id: str, version: str, stale: list[Failure]) -> None:
    """Edited since the encoder read it: the staged outputs go, the item fails as `stale_input` and the
    retry branch computes everything again from the new text."""
    if not stale:
        return
    open_ = batches.lock_waiting(conn, run_id, [f.ticket_id for f in stale], ctx.after_encoder)
    stale = [f for f in stale if f.ticket_id in open_]
    failures.record_failures(conn, run_id, version, stale, ctx.max_attempts)
    staging.unstage(conn, run_id, [f.ticket_id for f in stale])
    log.info("run %s: %d tickets edited since the encoder read them go down the retry branch", run_id, len(stale))


def write_part_file(ctx: BatchContext, run_id: str, part: int, path: Path) -> tuple[int, int] | None:
    """Writes the part's request file (0600) from its members and their current text; returns (requests,
    bytes), or None when the part was sent meanwhile. Members edited since they were recorded are recorded
    again with the new text (nothing was sent yet), or, after the encoder, leave the part and fail as
    `stale_input` (their staged outputs describe the old text); deleted or emptied ones leave the part and
    are skipped with their reason."""
    settings = ctx.settings
    with writing(ctx.engine) as conn:
        row = batches.lock_part(conn, run_id, part)
        if row.state not in (PART_PREPARED, PART_EXPORTED):
            return None  # another copy of the task has uploaded it meanwhile
        version = runs.get_run(conn, run_id).model_version
        recorded = {m.ticket_id: m for m in batches.members(conn, run_id, part)}
        changed, gone, stale, count, size = [], {}, [], 0, 0
        with open_private(path) as fh:
            for page in _pages(sorted(recorded)):
                current = ctx.source.by_ids(conn, page)
                for ticket_id in page:
                    ticket = current.get(ticket_id)
                    built = build_request(ticket, settings, version) if ticket else SkipReason.DELETED
                    if isinstance(built, SkipReason):
                        gone.setdefault(built, []).append(ticket_id)
                        continue
                    request, line = built
                    old = recorded[ticket_id]
                    edited = (old.content_hash, old.source_updated_at) != (
                        request.content_hash,
                        request.source_updated_at,
                    )
                    if edited and ctx.after_encoder:
                        stale.append(Failure(ticket_id, old.content_hash, FailureKind.STALE_INPUT))
                        continue
                    if edited:
                        changed.append(
                            dict(
                                ticket_id=ticket_id,
                                content_hash=request.content_hash,
                                source_updated_at=request.source_updated_at,
                                truncated=request.truncated,
                                est_tokens=request.est_tokens,
                            )
                        )
                    fh.write(line)
                    count += 1
                    size += len(line)
        batches.update_members(conn, run_id, part, changed)
        for reason, ids in gone.items():
            batches.drop_members(conn, run_id, part, ids)
            _skip(ctx, conn, run_id, ids, reason)
        batches.drop_members(conn, run_id, part, [f.ticket_id for f in stale])
        _fail_stale(ctx, conn, run_id, version, stale)
        values: dict = dict(request_count=count, request_bytes=size)
        if count == 0:
            values.update(state=PART_COLLECTED, collected_at=utcnow())
        batches.update_part(conn, run_id, part, **values)
    return count, size


def _pages(ids: list[str], size: int = PAGE):
    for k in range(0, len(ids), size):
        yield ids[k : k + size]


def _upload(ctx: BatchContext, client: BatchClient, run_id: str, part: int) -> None:
    with private_dir() as tmp:
        written = write_part_file(ctx, run_id, part, tmp / f"part-{part:05d}.jsonl")
        if written is None or written[0] == 0:
            return
        count, size = written
        file_id = client.upload(tmp / f"part-{part:05d}.jsonl")
    with writing(ctx.engine) as conn:
        recorded = batches.update_part(
            conn, run_id, part, only_in=PART_PREPARED, state=PART_UPLOADED, input_file_id=file_id
        )
    if not recorded:  # another copy of the task got there first: this upload is an orphan
        client.delete_file(file_id)
    log.info("run %s: part %d uploaded (%d requests, %d bytes) as file %s", run_id, part, count, size, file_id)


def _create(ctx: BatchContext, client: BatchClient, run_id: str, part: int) -> None:
    """Under the part's row lock: adopt the batch carrying the marker if one exists, else create it."""
    with writing(ctx.engine) as conn:
        row = batches.lock_part(conn, run_id, part)
        if row.state != PART_UPLOADED:
            return
        since = row.created_at - _seconds(FIND_LOOKBACK_SECONDS)
        info = client.find(row.marker, since)
        if info is None:
            try:
                info = client.create(row.input_file_id, row.marker, run_id, part)
            except BatchApiUnavailable:
                info = client.find(row.marker, since)  # the create may have happened before the error
                if info is None:
                    raise
        else:
            log.info("run %s: part %d found its batch %s again (created before a crash)", run_id, part, info.id)
        _record_submitted(conn, run_id, part, info)
    log.info("run %s: part %d submitted as batch %s (%s)", run_id, part, info.id, info.status)


def _record_submitted(conn: sa.Connection, run_id: str, part: int, info: BatchInfo) -> None:
    batches.update_part(
        conn,
        run_id,
        part,
        state=PART_SUBMITTED,
        provider_batch_id=info.id,
        provider_status=info.status,
        submitted_at=utcnow(),
        expires_at=info.expires_at,
    )


def _seconds(n: int) -> dt.timedelta:
    return dt.timedelta(seconds=n)


def submit_run(ctx: BatchContext, client: BatchClient, run_id: str) -> list[PartRef]:
    """Plans parts for everything waiting, then brings every unsent part of the run to `submitted`.

    Repeatable: a rerun after a crash (or a second copy) resumes, and never submits a part twice.
    Returns every part still waiting for its batch (this call's and earlier ones')."""
    ctx.ensure_tables()
    prepare_parts(ctx, run_id, mode="api")
    with ctx.engine.connect() as conn:
        todo = batches.parts(conn, run_id, [PART_PREPARED, PART_UPLOADED])
    for row in todo:
        if row.mode != "api":
            continue
        if row.state == PART_PREPARED:
            _upload(ctx, client, run_id, row.part)
        _create(ctx, client, run_id, row.part)
    return open_parts(ctx.engine, run_id)


def open_parts(engine: sa.Engine, run_id: str) -> list[PartRef]:
    """Submitted parts not yet collected: what the waiting task waits for."""
    with engine.connect() as conn:
        rows = batches.parts(conn, run_id, [PART_SUBMITTED])
    return [PartRef(run_id, r.part, r.provider_batch_id, r.state) for r in rows]


def wait_deadline(engine: sa.Engine, run_id: str, grace_seconds: int):
    """When waiting should stop: the latest provider expiry of the open parts plus the grace. A batch
    still not ended then is cancelled (`cancel_overdue`) and its requests go down the retry branch."""
    with engine.connect() as conn:
        rows = batches.parts(conn, run_id, [PART_SUBMITTED])
    ends = [r.expires_at for r in rows if r.expires_at is not None]
    if not ends:
        return None
    return max(ends) + _seconds(grace_seconds)
