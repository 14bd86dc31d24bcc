"""Turns a chunk of source tickets into staged outputs, typed failures and skips (no database here)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.engine.model import load_model
from inference.examples import load_example_files
from inference.heads import CategoryHead, extractive_summary
from inference.records import Failure, FailureKind, SkipReason, SourceTicket
from inference.store.db import utcnow
from inference.taxonomy import load_taxonomy
from inference.textprep import content_hash, max_chars_for, model_input, sentence_spans, token_ranges
from inference.validate import embedding_to_bytes

log = logging.getLogger("inference")


@dataclass
class Model:
    """Loaded once per task (the predictor pattern), then called per chunk."""

    encoder: Encoder
    category: CategoryHead | None
    version: str
    heads: tuple[str, ...] = ("embedding", "category", "summary")
    summarizer: object | None = None  # engine.generate.Summarizer for abstractive summaries

    @property
    def extractive(self) -> bool:
        return "summary" in self.heads and self.summarizer is None

    def with_budget(self, max_batch_tokens: int) -> Model:
        enc = self.encoder
        return dataclasses.replace(
            self, encoder=Encoder(enc.loaded, max_batch_tokens, enc.max_batch_size, enc.pad_multiple)
        )

    def for_retry(self, settings: Settings) -> Model:
        """One item per forward pass, in float32: a bad item cannot take others down, and a NaN that
        came from half precision does not come back. Reuses the weights when they are float32 already."""
        enc = self.encoder
        loaded = enc.loaded if enc.loaded.dtype == torch.float32 else _load_weights(settings, dtype="float32")
        return dataclasses.replace(self, encoder=Encoder(loaded, enc.max_batch_tokens, 1, enc.pad_multiple))


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


def category_head(settings: Settings, encoder: Encoder) -> CategoryHead:
    taxonomy = load_taxonomy(settings)
    examples = load_example_files(settings.fewshot_file, set(taxonomy))
    cache = None
    if settings.cache_dir:
        # Keyed on what the prototypes are computed from (weights, taxonomy, examples, dtype), never on
        # INFERENCE_MODEL_VERSION: a fixed version string must not serve prototypes of edited examples.
        from inference.modelinfo import heads_fingerprint, weights_fingerprint

        parts = (weights_fingerprint(settings.model_dir), heads_fingerprint(settings), encoder.loaded.dtype)
        key = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:24]
        cache = Path(settings.cache_dir) / f"category-{key}.npz"
    return CategoryHead(taxonomy, examples, encoder, settings.uncertain_below, cache=cache)


def load(settings: Settings, version: str) -> Model:
    loaded = _load_weights(settings, settings.dtype)
    encoder = Encoder(loaded, settings.max_batch_tokens, settings.max_batch_size)
    if loaded.device.type == "cuda" and settings.max_batch_tokens is None:
        budget = encoder.calibrate()
        log.info("calibrated the GPU token budget: %d padded tokens per forward pass", budget)
    category = category_head(settings, encoder) if "category" in settings.heads else None
    summarizer = None
    if "summary" in settings.heads and settings.summary == "abstractive":
        from inference.engine.generate import Summarizer

        summarizer = Summarizer(settings.summary_model, settings.device, settings.summary_max_tokens)
    return Model(encoder, category, version, settings.heads, summarizer)


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
    texts: list[str]
    hashes: list[str]
    cut: list[bool]
    ids: list[list[int]]
    truncated: list[bool]
    sentences: list[list[tuple[int, int]]] | None = None  # character ranges, for the extractive summary
    token_spans: list[list[tuple[int, int]]] | None = None  # the same sentences as token ranges


def prepare_chunk(model: Model, ticket_ids: Sequence[str], current: dict[str, SourceTicket]) -> PreparedChunk:
    max_chars = max_chars_for(model.encoder.loaded.max_length)
    skipped: dict[str, list[str]] = {}
    tickets, texts, cuts = [], [], []
    for ticket_id in ticket_ids:
        ticket = current.get(ticket_id)
        if ticket is None:
            skipped.setdefault(SkipReason.DELETED, []).append(ticket_id)
            continue
        text, cut = model_input(ticket.subject, ticket.body, max_chars)
        if text is None:
            skipped.setdefault(SkipReason.EMPTY_INPUT, []).append(ticket_id)
            continue
        tickets.append(ticket)
        texts.append(text)
        cuts.append(cut)
    hashes = [content_hash(t.subject, t.body) for t in tickets]
    prepared = PreparedChunk(list(ticket_ids), skipped, tickets, texts, hashes, cuts, [], [])
    if not texts:
        return prepared
    if not model.extractive:
        prepared.ids, prepared.truncated = model.encoder.tokenize(texts)
        return prepared
    prepared.ids, prepared.truncated, offsets = model.encoder.tokenize_with_offsets(texts)
    prepared.sentences, prepared.token_spans = [], []
    for text, token_offsets in zip(texts, offsets, strict=True):
        chars = sentence_spans(text)
        pairs = [(c, t) for c, t in zip(chars, token_ranges(chars, token_offsets), strict=True) if t is not None]
        prepared.sentences.append([c for c, _ in pairs])
        prepared.token_spans.append([t for _, t in pairs])
    return prepared


def run_chunk(model: Model, run_id: str, prepared: PreparedChunk) -> ChunkOutcome:
    """The model pass and the heads; outputs are matched to tickets by position in `prepared`."""
    outcome = ChunkOutcome(skipped={k: list(v) for k, v in prepared.skipped.items()})
    if not prepared.tickets:
        return outcome
    out = model.encoder.encode_ids(prepared.ids, prepared.truncated, prepared.token_spans)
    categories = model.category(out.embeddings) if model.category is not None else None
    abstracts = model.summarizer(prepared.texts) if model.summarizer is not None else None
    now = utcnow()
    for k, ticket in enumerate(prepared.tickets):
        error = out.errors.get(k) or (
            FailureKind.MODEL_ERROR if abstracts is not None and abstracts[k] is None else None
        )
        if error:
            failure = Failure(ticket.ticket_id, prepared.hashes[k], error)
            outcome.failures.append(failure)
            continue
        row = dict(
            run_id=run_id,
            ticket_id=ticket.ticket_id,
            content_hash=prepared.hashes[k],
            source_updated_at=ticket.version_at,
            model_version=model.version,
            embedding=embedding_to_bytes(out.embeddings[k]) if "embedding" in model.heads else None,
            category=None,
            category_score=None,
            category_confidence=None,
            category_uncertain=None,
            summary=None,
            truncated=bool(prepared.cut[k] or out.truncated[k]),
            input_tokens=out.tokens[k],
            created_at=now,
        )
        if categories is not None:
            row.update(
                category=categories.labels[k],
                category_score=float(categories.scores[k]),
                category_confidence=float(categories.confidence[k]),
                category_uncertain=bool(categories.uncertain[k]),
            )
        if abstracts is not None:
            row["summary"] = abstracts[k]
        elif model.extractive:
            row["summary"] = extractive_summary(
                prepared.texts[k], prepared.sentences[k], out.spans[k], out.embeddings[k]
            )
        outcome.staged.append(row)
    outcome.real_tokens, outcome.padded_tokens, outcome.seconds = out.real_tokens, out.padded_tokens, out.seconds
    return outcome


def compute_chunk(
    model: Model, run_id: str, ticket_ids: Sequence[str], current: dict[str, SourceTicket]
) -> ChunkOutcome:
    return run_chunk(model, run_id, prepare_chunk(model, ticket_ids, current))
