"""Turns a chunk of source tickets into staged outputs, typed failures and skips (no database here)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.engine.model import load_model
from inference.errors import RETRYABLE, SKIP_DELETED, SKIP_EMPTY, message_for
from inference.heads import CategoryHead
from inference.store.db import utcnow
from inference.store.runs import Failure
from inference.store.source import SourceTicket
from inference.taxonomy import load_taxonomy
from inference.textprep import content_hash, max_chars_for, model_input
from inference.validate import embedding_to_bytes

log = logging.getLogger("inference")


@dataclass
class Model:
    """Loaded once per task (the predictor pattern), then called per chunk."""

    encoder: Encoder
    category: CategoryHead
    version: str

    def with_budget(self, max_batch_tokens: int) -> Model:
        enc = self.encoder
        encoder = Encoder(enc.loaded, max_batch_tokens, enc.max_batch_size, enc.pad_multiple)
        return Model(encoder, self.category, self.version)

    def for_retry(self, settings: Settings) -> Model:
        """One item per forward pass, in float32: a bad item cannot take others down, and a NaN that
        came from half precision does not come back. Reuses the weights when they are float32 already."""
        enc = self.encoder
        if enc.loaded.dtype == torch.float32:
            return Model(Encoder(enc.loaded, enc.max_batch_tokens, 1, enc.pad_multiple), self.category, self.version)
        loaded = _load_weights(settings, dtype="float32")
        return Model(Encoder(loaded, enc.max_batch_tokens, 1, enc.pad_multiple), self.category, self.version)


def _load_weights(settings: Settings, dtype: str):
    return load_model(
        settings.model_dir,
        settings.device,
        settings.max_seq_length,
        dtype,
        threads=settings.threads,
        quantize=settings.quantize,
        compile=settings.compile,
    )


def load(settings: Settings, version: str) -> Model:
    loaded = _load_weights(settings, settings.dtype)
    encoder = Encoder(loaded, settings.max_batch_tokens, settings.max_batch_size)
    if loaded.device.type == "cuda" and settings.max_batch_tokens is None:
        budget = encoder.calibrate()
        log.info("calibrated the GPU token budget: %d padded tokens per forward pass", budget)
    return Model(encoder, CategoryHead(load_taxonomy(settings), encoder), version)


@dataclass
class ChunkOutcome:
    staged: list[dict] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    real_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0


@dataclass
class PreparedChunk:
    """CPU-side work done ahead of the model (on the prefetch thread): text policy, hashing, tokens."""

    ticket_ids: list[str]
    skipped: dict[str, list[str]]
    tickets: list[SourceTicket]
    hashes: list[str]
    cut: list[bool]
    ids: list[list[int]]
    truncated: list[bool]


def prepare_chunk(model: Model, ticket_ids: Sequence[str], current: dict[str, SourceTicket]) -> PreparedChunk:
    max_chars = max_chars_for(model.encoder.loaded.max_length)
    skipped: dict[str, list[str]] = {}
    tickets, texts, cuts = [], [], []
    for ticket_id in ticket_ids:
        ticket = current.get(ticket_id)
        if ticket is None:
            skipped.setdefault(SKIP_DELETED, []).append(ticket_id)
            continue
        text, cut = model_input(ticket.subject, ticket.body, max_chars)
        if text is None:
            skipped.setdefault(SKIP_EMPTY, []).append(ticket_id)
            continue
        tickets.append(ticket)
        texts.append(text)
        cuts.append(cut)
    ids, truncated = model.encoder.tokenize(texts) if texts else ([], [])
    hashes = [content_hash(t.subject, t.body) for t in tickets]
    return PreparedChunk(list(ticket_ids), skipped, tickets, hashes, cuts, ids, truncated)


def run_chunk(model: Model, run_id: str, prepared: PreparedChunk) -> ChunkOutcome:
    """The model pass and the heads; outputs are matched to tickets by position in `prepared`."""
    outcome = ChunkOutcome(skipped={k: list(v) for k, v in prepared.skipped.items()})
    if not prepared.tickets:
        return outcome
    out = model.encoder.encode_ids(prepared.ids, prepared.truncated)
    labels, scores = model.category(out.embeddings)
    now = utcnow()
    for k, ticket in enumerate(prepared.tickets):
        digest = prepared.hashes[k]
        error = out.errors.get(k)
        if error:
            outcome.failures.append(Failure(ticket.ticket_id, digest, error, RETRYABLE[error], message_for(error)))
            continue
        outcome.staged.append(
            dict(
                run_id=run_id,
                ticket_id=ticket.ticket_id,
                content_hash=digest,
                source_updated_at=ticket.version_at,
                model_version=model.version,
                embedding=embedding_to_bytes(out.embeddings[k]),
                category=labels[k],
                category_score=float(scores[k]),
                truncated=bool(prepared.cut[k] or out.truncated[k]),
                input_tokens=out.tokens[k],
                created_at=now,
            )
        )
    outcome.real_tokens, outcome.padded_tokens, outcome.seconds = out.real_tokens, out.padded_tokens, out.seconds
    return outcome


def compute_chunk(
    model: Model, run_id: str, ticket_ids: Sequence[str], current: dict[str, SourceTicket]
) -> ChunkOutcome:
    return run_chunk(model, run_id, prepare_chunk(model, ticket_ids, current))
