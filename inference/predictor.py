"""The predictor: an encoder and the configured heads, loaded once per task, then called per chunk.

No database here: a chunk of source tickets goes in, staged results, typed failures and skips come out.
`input_text` is the input policy the source applies to each row as it reads it (Source.model_inputs: the
model input and content hash, never whole texts, reach the predictor); `prepare` is the CPU work done ahead of
the model (skips, tokenizing; it runs on the prefetch thread); `run` is one encoder pass feeding every head,
with a cheap self-check that the outputs belong to their inputs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from inference import heads as head_registry
from inference.config import Settings
from inference.engine.base import BatchEncoder, EncodeOutput
from inference.errors import OutputsScrambled
from inference.heads import EncodedChunk, Head, LoadedHead
from inference.mailtext import ticket_text
from inference.records import Failure, FailureKind, SkipReason, StagedResult, TicketInput
from inference.textprep import max_chars_for, sentence_spans, token_ranges

log = logging.getLogger("inference")

SELF_CHECK_ITEMS = 3  # items per chunk encoded again alone (the scrambled-output self-check)
SELF_CHECK_MIN_COSINE = 0.98  # batched vs alone: float32 ~1.0, half precision > 0.99; another ticket's is lower
_RNG = random.Random()


@dataclass
class PreparedChunk:
    ticket_ids: list[str]
    skipped: dict[SkipReason, list[str]]
    tickets: list[TicketInput]
    texts: list[str]
    hashes: list[str]
    cut: list[bool]
    ids: list[list[int]] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)
    sentences: list[list[tuple[int, int]]] | None = None  # character ranges, for heads that want sentences
    token_spans: list[list[tuple[int, int]]] | None = None  # the same sentences as token ranges


@dataclass
class ChunkOutcome:
    staged: list[StagedResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[SkipReason, list[str]] = field(default_factory=dict)
    real_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)

    @property
    def ticket_ids(self) -> list[str]:
        ids = [r.ticket_id for r in self.staged] + [f.ticket_id for f in self.failures]
        return ids + [t for group in self.skipped.values() for t in group]

    def only(self, keep: set[str]) -> ChunkOutcome:
        """The part of this outcome about these tickets (the metrics stay: the model work was done)."""
        return dataclasses.replace(
            self,
            staged=[r for r in self.staged if r.ticket_id in keep],
            failures=[f for f in self.failures if f.ticket_id in keep],
            skipped={k: [t for t in v if t in keep] for k, v in self.skipped.items()},
        )


@dataclass
class Predictor:
    encoder: BatchEncoder
    heads: tuple[tuple[Head, LoadedHead], ...]
    version: str

    @property
    def needs_sentences(self) -> bool:
        return any(loaded.needs_sentences for _, loaded in self.heads)

    @property
    def head_names(self) -> tuple[str, ...]:
        return tuple(head.name for head, _ in self.heads)

    def with_budget(self, max_batch_tokens: int) -> Predictor:
        return dataclasses.replace(self, encoder=self.encoder.with_budget(max_batch_tokens))

    def for_retry(self) -> Predictor:
        """One item per forward pass, in float32 (see BatchEncoder.for_isolation)."""
        return dataclasses.replace(self, encoder=self.encoder.for_isolation())

    @property
    def max_chars(self) -> int:
        return max_chars_for(self.encoder.max_length)

    def input_text(self, subject: str | None, body: str | None) -> tuple[str | None, bool]:
        """The model input of one ticket: the input policy, the mail tail cut off; (text or None, cut flag).
        The source applies it row by row as it reads (Source.model_inputs), so no chunk holds whole texts."""
        return ticket_text(subject, body, self.max_chars)

    def prepare(self, ticket_ids: Sequence[str], current: dict[str, TicketInput]) -> PreparedChunk:
        skipped: dict[SkipReason, list[str]] = {}
        tickets, texts, cuts = [], [], []
        for ticket_id in ticket_ids:
            ticket = current.get(ticket_id)
            if ticket is None:
                skipped.setdefault(SkipReason.DELETED, []).append(ticket_id)
                continue
            if ticket.text is None:
                skipped.setdefault(SkipReason.EMPTY_INPUT, []).append(ticket_id)
                continue
            tickets.append(ticket)
            texts.append(ticket.text)
            cuts.append(ticket.cut)
        hashes = [t.content_hash for t in tickets]
        prepared = PreparedChunk(list(ticket_ids), skipped, tickets, texts, hashes, cuts)
        if not texts:
            return prepared
        if not self.needs_sentences:
            prepared.ids, prepared.truncated = self.encoder.tokenize(texts)
            return prepared
        prepared.ids, prepared.truncated, offsets = self.encoder.tokenize_with_offsets(texts)
        prepared.sentences, prepared.token_spans = [], []
        for text, token_offsets in zip(texts, offsets, strict=True):
            chars = sentence_spans(text)
            pairs = [(c, t) for c, t in zip(chars, token_ranges(chars, token_offsets), strict=True) if t is not None]
            prepared.sentences.append([c for c, _ in pairs])
            prepared.token_spans.append([t for _, t in pairs])
        return prepared

    def run(self, run_id: str, prepared: PreparedChunk) -> ChunkOutcome:
        """One encoder pass, then every head; outputs are matched to tickets by position in `prepared`."""
        outcome = ChunkOutcome(skipped={k: list(v) for k, v in prepared.skipped.items()})
        if not prepared.tickets:
            return outcome
        out = self.encoder.encode_ids(prepared.ids, prepared.truncated, prepared.token_spans)
        self.self_check(prepared, out)
        errors: dict[int, FailureKind] = dict(out.errors)
        ok = [k for k in range(len(prepared.tickets)) if k not in errors]
        chunk = EncodedChunk(
            texts=[prepared.texts[k] for k in ok],
            embeddings=out.embeddings[ok],
            sentences=[prepared.sentences[k] for k in ok] if prepared.sentences is not None else None,
            sentence_vectors=[out.spans[k] for k in ok] if prepared.token_spans is not None else None,
        )
        values: list[dict] = [{} for _ in ok]
        for _, loaded in self.heads:
            result = loaded(chunk)
            for j, item in enumerate(result.values):
                values[j].update(item)
            for j, kind in result.errors.items():
                errors.setdefault(ok[j], kind)
        now = dt.datetime.now(dt.UTC)
        by_position = dict(zip(ok, values, strict=True))
        for k, ticket in enumerate(prepared.tickets):
            if k in errors:
                outcome.failures.append(Failure(ticket.ticket_id, prepared.hashes[k], errors[k]))
                continue
            outcome.staged.append(
                StagedResult(
                    run_id=run_id,
                    ticket_id=ticket.ticket_id,
                    content_hash=prepared.hashes[k],
                    source_updated_at=ticket.version_at,
                    model_version=self.version,
                    truncated=bool(prepared.cut[k] or out.truncated[k]),
                    input_tokens=out.tokens[k],
                    created_at=now,
                    outputs=by_position[k],
                )
            )
        outcome.real_tokens, outcome.padded_tokens, outcome.seconds = out.real_tokens, out.padded_tokens, out.seconds
        outcome.batch_sizes = list(out.batch_sizes)
        return outcome

    def self_check(self, prepared: PreparedChunk, out: EncodeOutput) -> None:
        """A few random items of the chunk, encoded again alone, must match their outputs from the batched pass:
        outputs put back in the wrong order (an un-sort bug, a device fault) would write every row under another
        ticket's ID. Costs SELF_CHECK_ITEMS single-item forward passes per chunk. Raises OutputsScrambled: the
        chunk is not written."""
        ok = [k for k in range(len(prepared.tickets)) if k not in out.errors]
        if len(ok) < 2 or self.encoder.max_batch_size < 2:
            return
        for k in _picks(ok, [len(prepared.ids[k]) for k in ok]):
            spans = [prepared.token_spans[k]] if prepared.token_spans is not None else None
            alone = self.encoder.encode_ids([prepared.ids[k]], [prepared.truncated[k]], spans)
            if alone.errors:
                continue  # it fails alone (NaN, OOM...): nothing to compare with
            similarity = float(np.dot(alone.embeddings[0], out.embeddings[k]))
            if spans is not None:
                mine, again = out.spans.get(k), alone.spans.get(0)
                if mine is None or again is None or mine.shape != again.shape:
                    similarity = -1.0
                elif len(mine):
                    similarity = min(similarity, float(np.min(np.sum(mine * again, axis=1))))
            if not similarity >= SELF_CHECK_MIN_COSINE:
                raise OutputsScrambled(
                    f"self-check failed: ticket {prepared.tickets[k].ticket_id} encoded alone does not match its "
                    f"output from the batched pass (cosine {similarity:.3f} < {SELF_CHECK_MIN_COSINE}): the engine "
                    "returned outputs that do not belong to their inputs; this chunk was not written"
                )

    def compute(self, run_id: str, ticket_ids: Sequence[str], current: dict[str, TicketInput]) -> ChunkOutcome:
        return self.run(run_id, self.prepare(ticket_ids, current))


def _picks(ok: list[int], lengths: list[int]) -> list[int]:
    """The self-check's items: the shortest and the longest (a batching loop sorts by length, so an un-sort
    bug moves them most), and random others, SELF_CHECK_ITEMS in all."""
    chosen = list(dict.fromkeys([ok[lengths.index(min(lengths))], ok[lengths.index(max(lengths))]]))
    rest = [k for k in ok if k not in chosen]
    return chosen + _RNG.sample(rest, max(0, min(SELF_CHECK_ITEMS - len(chosen), len(rest))))


def build_predictor(settings: Settings, encoder: BatchEncoder, version: str | None = None) -> Predictor:
    """The configured heads around this encoder (the injection point for a stand-in encoder)."""
    if version is None:
        from inference.modelinfo import model_version

        version = model_version(settings)
    loaded = tuple((head, head.build(settings, encoder)) for head in head_registry.configured(settings))
    return Predictor(encoder, loaded, version)


def load_predictor(settings: Settings, version: str | None = None) -> Predictor:
    """The real model (torch), loaded once per task; on CUDA the token budget is calibrated first."""
    from inference.engine.encoder import Encoder

    encoder = Encoder.from_settings(settings)
    if encoder.device_type == "cuda" and settings.max_batch_tokens is None:
        budget = encoder.calibrate()
        log.info("calibrated the GPU token budget: %d padded tokens per forward pass", budget)
    return build_predictor(settings, encoder, version)
