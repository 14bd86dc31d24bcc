"""load_results: validate staged outputs, upsert them by ticket ID, settle each item's state; then the
retraction sweep (results of tickets deleted from the source)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa

from inference.config import Settings
from inference.heads.summary_batch import waiting_columns
from inference.modelinfo import model_id
from inference.pipeline.runtime import Runtime, log
from inference.pipeline.steptimes import timed_step
from inference.records import Failure, FailureKind, LoadSummary, SkipReason, SourceVersion, StagedResult
from inference.store import bulk, failures, items, runs, staging
from inference.store.db import utcnow, writing
from inference.store.results import (
    CURRENT_VERSION,
    current_model_version,
    replace_if_unchanged,
    stored_rows,
    upsert_results,
    upsert_staged,
)
from inference.store.retraction import sweep_deleted
from inference.store.schema import ITEM_SKIPPED, ITEM_SUCCEEDED, inference_runs, inference_staging, ticket_results
from inference.validate import output_checker

RESULT_COLUMNS = tuple(c.name for c in ticket_results.columns)


@timed_step("load_results")
def load_results(settings: Settings, run_id: str) -> LoadSummary:
    with Runtime(settings) as rt:
        with rt.engine.connect() as conn:
            version = runs.get_run(conn, run_id).model_version
        summary = load_staged(rt, run_id, version)
        if settings.retract_deleted:
            summary.retracted = sweep_deleted(rt.engine, rt.source)
            if summary.retracted:  # a sweep that finds nothing writes nothing
                with writing(rt.engine) as conn:
                    runs.update_run(conn, run_id, retracted=inference_runs.c.retracted + summary.retracted)
            log.info("run %s: %d results of tickets deleted from the source removed", run_id, summary.retracted)
        return summary


def load_staged(rt: Runtime, run_id: str, version: str) -> LoadSummary:
    """Page by page (ticket_id order); each page commits as one transaction and leaves staging.

    Killed mid-way, a rerun finds only the pages not yet committed. Two loads at once converge:
    the second finds the results already current and counts them succeeded.

    A staged result is written only while its content hash is the hash of the ticket's current text: a
    ticket edited after infer read it fails as `stale_input` (retryable; the retry reads the new text),
    whatever its timestamps say. A result of the current model version (the most recently planned run's) is
    never replaced by another version's: the item is skipped `model_outdated`. A staged row with no item in
    the run is never written (finish_run's reconciliation fails on it).
    """
    loader = Loader(rt, run_id, version)
    totals = LoadSummary(run_id)
    bulk.analyze(rt.engine, inference_staging)  # it may have grown by millions of rows since it was last analyzed
    after = ""
    while True:
        with rt.engine.connect() as conn:
            ids = staging.staged_ids(conn, run_id, after, rt.settings.chunk_size)
        if not ids:
            break
        after = ids[-1]
        if rt.engine.dialect.name == "postgresql":  # one transaction per page: read locked, judged, written
            with writing(rt.engine) as conn:
                totals.add(loader.load(conn, staging.staged_rows(conn, run_id, ids)))
        else:  # SQLite: judged before the write lock is taken (a concurrent run may write meanwhile)
            with rt.engine.connect() as conn:
                judged = loader.judge(conn, staging.staged_rows(conn, run_id, ids))
            with writing(rt.engine) as conn:
                totals.add(loader.write(conn, judged))
    loader.log(totals)
    return totals


@dataclass
class Judged:
    """A page of staged results sorted out against the source and the checks, not yet written."""

    ids: list[str] = field(default_factory=list)
    valid: list[dict] = field(default_factory=list)  # result rows to write
    invalid: list[Failure] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    now: dt.datetime | None = None  # the written rows' created_at / updated_at


class Loader:
    """Validates staged results and writes them, settling their items, inside the caller's transaction, which
    read them (locked): load_results page by page, and infer_shard chunk by chunk as it commits them (so a
    shard's results are visible while other shards still run)."""

    def __init__(self, rt: Runtime, run_id: str, version: str):
        self.rt, self.run_id, self.version = rt, run_id, version
        self.check, self.model_id = output_checker(rt.settings), model_id(rt.settings.model_dir)
        self.waiting = waiting_columns(rt.settings)  # filled in later by the Batch API step: such rows stay staged

    def load(
        self,
        conn: sa.Connection,
        page: list[StagedResult],
        known: set[str] | None = None,
        *,
        in_staging: bool = True,
        as_read: Mapping[str, tuple[str, SourceVersion]] | None = None,
        taken: set[str] = frozenset(),
    ) -> LoadSummary:
        """Writes the complete rows of `page` (those not waiting for a Batch API summary), gives each of their
        items its final state and unstages them; returns the counts. `known`: these tickets are known to have
        an item in the run (the caller holds their locks), so that is not looked up again. `in_staging=False`:
        the page was never staged (infer_shard's outputs, in memory): written from memory, nothing to unstage.
        `as_read`: what the model read of these tickets (Source.versions). `taken`: these items are already
        set succeeded in this transaction (items.take_open_items): only other outcomes are written to them."""
        return self.write(conn, self.judge(conn, page, known, as_read), in_staging=in_staging, taken=taken)

    def judge(
        self,
        conn: sa.Connection,
        page: list[StagedResult],
        known: set[str] | None = None,
        as_read: Mapping[str, tuple[str, SourceVersion]] | None = None,
    ) -> Judged:
        """The page against the source's current text (read now; a ticket whose source rows are still the row
        versions the model read, `as_read`, is known unchanged unread), the run's items and the output checks."""
        run_id, version = self.run_id, self.version
        page = [r for r in page if all(r.outputs.get(c) is not None for c in self.waiting)]
        out = Judged(ids=[r.ticket_id for r in page])
        if not page:
            return out
        latest = self.rt.source.versions(conn, out.ids, as_read)
        if known is None:
            known = items.item_ids(conn, run_id, out.ids)
        out.now = now = utcnow()
        current_text: list[tuple[StagedResult, SourceVersion]] = []
        for staged in page:
            current = latest.get(staged.ticket_id)
            if staged.ticket_id not in known:
                out.orphans.append(staged.ticket_id)
            elif current is None:
                out.deleted.append(staged.ticket_id)
            elif current.content_hash != staged.content_hash:  # edited after infer read it
                out.invalid.append(Failure(staged.ticket_id, staged.content_hash, FailureKind.STALE_INPUT))
            else:
                current_text.append((staged, current))
        # checked as the result rows they become (the same outputs, content hash and token count as staged)
        rows = [_result_row(staged, current, self.model_id, now) for staged, current in current_text]
        reasons = self.check.page(rows)
        for (staged, _), row, reason in zip(current_text, rows, reasons, strict=True):
            if reason := reason or ("staged by another model version" if staged.model_version != version else None):
                out.invalid.append(Failure(staged.ticket_id, staged.content_hash, FailureKind.INVALID_OUTPUT, reason))
            else:
                out.valid.append(row)
        return out

    def write(
        self, conn: sa.Connection, judged: Judged, *, in_staging: bool = True, taken: set[str] = frozenset()
    ) -> LoadSummary:
        """Upserts the valid rows, settles every judged item and unstages the page, in the caller's transaction.
        `taken`: items already set succeeded in this transaction (see `load`)."""
        run_id, version = self.run_id, self.version
        if not judged.ids:
            return LoadSummary(run_id)
        valid = judged.valid
        if in_staging and conn.dialect.name == "postgresql":  # from the locked staged rows: no second copy sent
            at = {r["ticket_id"]: r["source_updated_at"] for r in valid}
            written = upsert_staged(conn, run_id, at, self.model_id, judged.now, CURRENT_VERSION)
        else:
            written = upsert_results(conn, valid, CURRENT_VERSION)
        refused = [r for r in valid if r["ticket_id"] not in written]
        now_current = current_model_version(conn) if refused else None
        settled = _settle_refused(self.rt, conn, refused, version, now_current)
        done = [*written, *settled.written, *settled.unchanged]
        items.set_items(conn, run_id, [t for t in done if t not in taken], ITEM_SUCCEEDED, None)
        items.set_items(conn, run_id, settled.superseded, ITEM_SKIPPED, SkipReason.SUPERSEDED)
        items.set_items(conn, run_id, settled.outdated, ITEM_SKIPPED, SkipReason.MODEL_OUTDATED)
        items.set_items(conn, run_id, [*judged.deleted, *settled.deleted], ITEM_SKIPPED, SkipReason.DELETED)
        failures.resolve_failures(conn, done)
        rejected = [*judged.invalid, *settled.stale]
        failures.record_failures(conn, run_id, version, rejected, self.rt.settings.max_attempts)
        orphans = set(judged.orphans)
        if in_staging:
            staging.unstage(conn, run_id, [t for t in judged.ids if t not in orphans])
        return LoadSummary(
            run_id,
            written=len(written) + len(settled.written),
            unchanged=len(settled.unchanged),
            superseded=len(settled.superseded),
            invalid=len(judged.invalid) + len(settled.stale),
            deleted=len(judged.deleted) + len(settled.deleted),
            outdated=len(settled.outdated),
            orphaned=len(orphans),
        )

    def log(self, totals: LoadSummary) -> None:
        if totals.orphaned:
            log.error(
                "run %s load: %d staged results have no run item in this run: not written (finish_run fails the run)",
                self.run_id,
                totals.orphaned,
            )
        log.info(
            "run %s load: %d written, %d already current, %d superseded by newer results, %d kept for the current "
            "model version, %d invalid or stale, %d deleted",
            self.run_id,
            totals.written,
            totals.unchanged,
            totals.superseded,
            totals.outdated,
            totals.invalid,
            totals.deleted,
        )


def _result_row(staged: StagedResult, current: SourceVersion, mid: str, now) -> dict:
    """Every column of ticket_results (outputs of heads not configured are NULL, as read back from staging)."""
    row = dict.fromkeys(RESULT_COLUMNS)
    row.update(staged.outputs)
    row.update(
        ticket_id=staged.ticket_id,
        model_id=mid,
        model_version=staged.model_version,
        content_hash=staged.content_hash,
        source_updated_at=current.version_at,  # the same text; its version time may have moved either way
        truncated=staged.truncated,
        input_tokens=staged.input_tokens,
        run_id=staged.run_id,
        created_at=now,
        updated_at=now,
    )
    return row


class _Settled:
    def __init__(self) -> None:
        self.written: list[str] = []
        self.unchanged: list[str] = []
        self.superseded: list[str] = []
        self.outdated: list[str] = []
        self.deleted: list[str] = []
        self.stale: list[Failure] = []


def _settle_refused(rt: Runtime, conn: sa.Connection, rows: list[dict], version: str, now_current) -> _Settled:
    """Rows the upsert's guard kept out, decided on the source read again inside this transaction (SQLite:
    under the write lock; PostgreSQL: the latest committed text): a newer result of the current text stays
    (superseded), a result of the current model version stays (model_outdated), the same result is already
    there (unchanged); but when our text is still the current one and the stored result is not, the guard
    was misled by the source's timestamps (updated_at went backwards): the stored result is replaced, if no
    one changed it meanwhile."""
    out = _Settled()
    if not rows:
        return out
    ids = [r["ticket_id"] for r in rows]
    stored, fresh = stored_rows(conn, ids), rt.source.versions(conn, ids)
    for row in rows:
        t, digest = row["ticket_id"], row["content_hash"]
        s, f = stored.get(t), fresh.get(t)
        if f is None:
            out.deleted.append(t)
        elif s is not None and (s.content_hash, s.model_version) == (digest, version):
            out.unchanged.append(t)
        elif s is not None and s.model_version == now_current and version != now_current:
            out.outdated.append(t)
        elif f.content_hash != digest:
            if s is not None and s.content_hash == f.content_hash:
                out.superseded.append(t)
            else:  # edited again meanwhile: the retry reads the new text
                out.stale.append(Failure(t, digest, FailureKind.STALE_INPUT))
        elif s is None:  # removed meanwhile: write it
            (out.written if upsert_results(conn, [row], now_current) else out.superseded).append(t)
        else:
            row["source_updated_at"] = f.version_at
            (out.written if replace_if_unchanged(conn, row, s) else out.superseded).append(t)
    return out


def has_retries(settings: Settings, run_id: str) -> bool:
    """Whether some of the run's failures still wait for a retry (the DAG's branch decision)."""
    with Runtime(settings) as rt, rt.engine.connect() as conn:
        return failures.count_retryable(conn, run_id) > 0
