"""The predictor: an encoder and the configured heads, loaded once per task, then called per chunk.

No database here: a chunk of source tickets goes in, staged results, typed failures and skips come out.
`prepare` is the CPU work done ahead of the model (input policy, hashing, tokenizing; it runs on the
prefetch thread); `run` is one encoder pass feeding every head.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from inference import heads as head_registry
from inference.config import Settings
from inference.engine.base import BatchEncoder
from inference.heads import EncodedChunk, Head, LoadedHead
from inference.mailtext import ticket_text
from inference.records import Failure, FailureKind, SkipReason, SourceTicket, StagedResult
from inference.textprep import content_hash, max_chars_for, sentence_spans, token_ranges

log = logging.getLogger("inference")


@dataclass
class PreparedChunk:
    ticket_ids: list[str]
    skipped: dict[SkipReason, list[str]]
    tickets: list[SourceTicket]
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

    def prepare(self, ticket_ids: Sequence[str], current: dict[str, SourceTicket]) -> PreparedChunk:
        max_chars = max_chars_for(self.encoder.max_length)
        skipped: dict[SkipReason, list[str]] = {}
        tickets, texts, cuts = [], [], []
        for ticket_id in ticket_ids:
            ticket = current.get(ticket_id)
            if ticket is None:
                skipped.setdefault(SkipReason.DELETED, []).append(ticket_id)
                continue
            text, cut = ticket_text(ticket.subject, ticket.body, max_chars)  # input policy, mail tail cut off
            if text is None:
                skipped.setdefault(SkipReason.EMPTY_INPUT, []).append(ticket_id)
                continue
            tickets.append(ticket)
            texts.append(text)
            cuts.append(cut)
        hashes = [content_hash(t.subject, t.body) for t in tickets]
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

    def compute(self, run_id: str, ticket_ids: Sequence[str], current: dict[str, SourceTicket]) -> ChunkOutcome:
        return self.run(run_id, self.prepare(ticket_ids, current))


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
