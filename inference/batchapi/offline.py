"""The same night without a provider: export the run's request files, run them on your own GPU box with
an offline batch runner that reads the OpenAI batch format (vLLM: `vllm run-batch -i part.jsonl -o
result.jsonl --model ...`), import the result files. Nothing here touches a network.

Export records parts exactly like a submission (members, attempts), so an import is matched, validated
and retried exactly like a provider's batch; a request with no line in the imported files fails as
`batch_missing` and goes out again in the next export.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from inference.batchapi.collect import apply_outcome, reader_for
from inference.batchapi.submit import BatchContext, prepare_parts, write_part_file
from inference.store import batches
from inference.store.batch_tables import PART_EXPORTED, PART_PREPARED
from inference.store.db import writing

log = logging.getLogger("inference.batchapi")
OFFLINE = "offline"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class ImportSummary:
    run_id: str
    parts: list[int] = field(default_factory=list)
    replies: int = 0
    failed: int = 0
    lines: int = 0
    duplicates: int = 0
    unknown: int = 0
    malformed: int = 0
    missing: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def file_name(run_id: str, part: int) -> str:
    return f"{_UNSAFE.sub('_', run_id)[:80]}.part{part:05d}.jsonl"


def export_requests(ctx: BatchContext, run_id: str, out_dir: Path) -> list[Path]:
    """Writes one request file (0600) per part waiting offline: new parts for everything waiting for a
    request, and again any exported part not yet imported (a lost file can be exported again)."""
    ctx.ensure_tables()
    out_dir.mkdir(parents=True, exist_ok=True)
    prepare_parts(ctx, run_id, mode=OFFLINE)
    with ctx.engine.connect() as conn:
        todo = [r for r in batches.parts(conn, run_id, [PART_PREPARED, PART_EXPORTED]) if r.mode == OFFLINE]
    written = []
    for row in todo:
        path = out_dir / file_name(run_id, row.part)
        path.unlink(missing_ok=True)
        result = write_part_file(ctx, run_id, row.part, path)
        if result is None or result[0] == 0:
            path.unlink(missing_ok=True)
            continue
        count, size = result
        with writing(ctx.engine) as conn:
            batches.update_part(conn, run_id, row.part, state=PART_EXPORTED, provider_status="exported")
        log.info("run %s: part %d exported (%d requests, %d bytes)", run_id, row.part, count, size)
        written.append(path)
    return written


def import_results(ctx: BatchContext, run_id: str, paths: Iterable[Path]) -> ImportSummary:
    """Reads result files (any order, any split across files) against every exported part of the run,
    then collects those parts: each request ends as a staged reply or a typed failure."""
    ctx.ensure_tables()
    with ctx.engine.connect() as conn:
        parts = [r.part for r in batches.parts(conn, run_id, [PART_EXPORTED]) if r.mode == OFFLINE]
    summary = ImportSummary(run_id, parts)
    if not parts:
        return summary
    reader = reader_for(ctx, run_id, parts)
    for path in paths:
        with Path(path).open("rb") as fh:
            reader.feed_all(fh)
    outcome = reader.finish("completed")
    c = outcome.counts
    summary.lines, summary.duplicates, summary.unknown = c.lines, c.duplicates, c.unknown
    summary.malformed, summary.missing = c.malformed, c.missing
    with ctx.engine.connect() as conn:
        member_of = {m.ticket_id: p for p in parts for m in batches.members(conn, run_id, p)}
    for part in parts:
        share = type(outcome)(
            replies={t: r for t, r in outcome.replies.items() if member_of.get(t) == part},
            failures=[f for f in outcome.failures if member_of.get(f.ticket_id) == part],
            counts=c if part == parts[0] else type(c)(),  # the file-level counts, recorded once
        )
        share.input_tokens = sum(r.input_tokens or 0 for r in share.replies.values())
        share.output_tokens = sum(r.output_tokens or 0 for r in share.replies.values())
        if apply_outcome(ctx, run_id, part, share, "imported"):
            summary.replies += len(share.replies)
            summary.failed += len(share.failures)
    log.info(
        "run %s: imported %d replies and %d failures into parts %s", run_id, summary.replies, summary.failed, parts
    )
    return summary
