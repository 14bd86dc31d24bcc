"""A predictor that returns valid outputs instantly: the pipeline-overhead benchmark's engine (never a default).

It keeps everything the pipeline relies on (the content hash of the whole text, computed by the source as it
reads; deleted and empty tickets skipped; one staged result or typed failure per ticket) and replaces the
model, the tokenizer, the input policy's mail-tail cut and the heads' CPU work with outputs the real heads
computed once, on a few sample tickets, with the stand-in encoder: every output passes the configured heads'
checks, as a real one must. What is left to time is the pipeline and the database. The CPU the input policy,
the tokenizer and the heads need per ticket is measured separately (`--engine standin`: the stand-in encoder
with the real heads and input policy).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from inference.config import Settings
from inference.predictor import ChunkOutcome, Predictor, PreparedChunk, build_predictor
from inference.records import Failure, FailureKind, SkipReason, StagedResult, TicketInput
from inference.seed import generate
from inference.textprep import content_hash, has_text


@dataclass
class InstantPredictor(Predictor):
    samples: tuple[dict, ...] = ()
    fail_every: int = 0  # ticket IDs divisible by this fail once (model_error) so the retry branch runs

    def input_text(self, subject: str | None, body: str | None) -> tuple[str | None, bool]:
        """Nothing visible: None (skipped empty_input, as the real policy decides); else a short prefix."""
        if not has_text(subject, body):
            return None, False
        return f"{subject or ''}\n{body or ''}"[:200], False

    def prepare(self, ticket_ids: Sequence[str], current: dict[str, TicketInput]) -> PreparedChunk:
        skipped: dict[SkipReason, list[str]] = {}
        tickets = []
        for ticket_id in ticket_ids:
            ticket = current.get(ticket_id)
            if ticket is None:
                skipped.setdefault(SkipReason.DELETED, []).append(ticket_id)
            elif ticket.text is None:
                skipped.setdefault(SkipReason.EMPTY_INPUT, []).append(ticket_id)
            else:
                tickets.append(ticket)
        hashes = [t.content_hash for t in tickets]
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
    sample = {}
    for i, subject, body in generate(64, seed=11):
        text, cut = real.input_text(subject, body)
        sample[str(i)] = TicketInput(str(i), now, content_hash(subject, body), text, cut)
    outcome = real.compute("sample", list(sample), sample)
    samples = tuple((r.input_tokens, r.outputs) for r in outcome.staged)
    return InstantPredictor(real.encoder, real.heads, version, samples, fail_every)
