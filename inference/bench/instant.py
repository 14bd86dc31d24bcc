"""A predictor that returns valid outputs instantly: the pipeline-overhead benchmark's engine (never a default).

It keeps everything the pipeline relies on (the real content hash, the skip policy for deleted and empty
tickets, one staged result or typed failure per ticket) and replaces the model *and* the heads' CPU work
with outputs the real heads computed once, on a few sample tickets, with the stand-in encoder: every
output passes the configured heads' checks, as a real one must. What is left to time is the pipeline
and the database. The CPU the heads and tokenizer need per ticket is measured separately (`--engine
standin`: the stand-in encoder with the real heads).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from inference.config import Settings
from inference.predictor import ChunkOutcome, Predictor, PreparedChunk, build_predictor
from inference.records import Failure, FailureKind, SkipReason, SourceTicket, StagedResult
from inference.seed import generate
from inference.textprep import content_hash


@dataclass
class InstantPredictor(Predictor):
    samples: tuple[dict, ...] = ()
    fail_every: int = 0  # ticket IDs divisible by this fail once (model_error) so the retry branch runs

    def prepare(self, ticket_ids: Sequence[str], current: dict[str, SourceTicket]) -> PreparedChunk:
        skipped: dict[SkipReason, list[str]] = {}
        tickets, hashes = [], []
        for ticket_id in ticket_ids:
            ticket = current.get(ticket_id)
            if ticket is None:
                skipped.setdefault(SkipReason.DELETED, []).append(ticket_id)
            elif not ((ticket.subject or "").strip() or (ticket.body or "").strip()):
                skipped.setdefault(SkipReason.EMPTY_INPUT, []).append(ticket_id)
            else:
                tickets.append(ticket)
                hashes.append(content_hash(ticket.subject, ticket.body))
        return PreparedChunk(list(ticket_ids), skipped, tickets, [], hashes, [False] * len(tickets))

    def run(self, run_id: str, prepared: PreparedChunk) -> ChunkOutcome:
        outcome = ChunkOutcome(skipped={k: list(v) for k, v in prepared.skipped.items()})
        now = dt.datetime.now(dt.UTC)
        for k, ticket in enumerate(prepared.tickets):
            if self.fail_every and ticket.ticket_id.isdigit() and int(ticket.ticket_id) % self.fail_every == 0:
                outcome.failures.append(Failure(ticket.ticket_id, prepared.hashes[k], FailureKind.MODEL_ERROR))
                continue
            tokens, outputs = self.samples[k % len(self.samples)]
            outcome.staged.append(
                StagedResult(
                    run_id,
                    ticket.ticket_id,
                    prepared.hashes[k],
                    ticket.version_at,
                    self.version,
                    False,
                    tokens,
                    now,
                    dict(outputs),
                )
            )
        outcome.real_tokens = outcome.padded_tokens = sum(r.input_tokens for r in outcome.staged)
        outcome.batch_sizes = [len(outcome.staged)] if outcome.staged else []
        return outcome

    def for_retry(self) -> InstantPredictor:
        return dataclasses.replace(super().for_retry(), fail_every=0)


def instant_predictor(settings: Settings, version: str, fail_every: int = 0) -> InstantPredictor:
    from inference.engine.standin import StandInEncoder

    real = build_predictor(settings, StandInEncoder(max_length=settings.max_seq_length), version)
    now = dt.datetime.now(dt.UTC)
    sample = {str(i): SourceTicket(str(i), s, b, now) for i, s, b in generate(64, seed=11) if (s or b or "").strip()}
    outcome = real.compute("sample", list(sample), sample)
    samples = tuple((r.input_tokens, r.outputs) for r in outcome.staged)
    return InstantPredictor(real.encoder, real.heads, version, samples, fail_every)
