"""The encoder's contract and its batching loop, without torch.

`BatchEncoder.encode_ids` sorts, batches under a token budget and isolates failures; a subclass only
says how to tokenize and how to run one padded batch (`forward`). The real one is
`inference.engine.encoder.Encoder` (torch); `inference.engine.standin.StandInEncoder` is a deterministic
numpy stand-in for fast tests and the pipeline-overhead benchmark (never a default).

Item failures never fail the call: a batch that runs out of memory or raises is split in halves until
the single bad item is isolated; its row comes back as NaN with a typed failure, the rest succeed.
Errors that mean the device itself is broken are re-raised as DeviceBroken, so the task process exits
and Airflow retries it in a fresh process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from inference.engine.batching import Batch, plan_batches, round_up
from inference.errors import DeviceBroken
from inference.records import FailureKind

Spans = Sequence[tuple[int, int]]  # token ranges [start, end) of one item (its sentences)


@dataclass
class ForwardOutput:
    """One padded batch through the model: unit embeddings, and per-row span vectors when asked for."""

    embeddings: np.ndarray  # float32 [rows, dim], L2-normalised
    spans: list[np.ndarray] | None = None  # per row: float32 [n_spans, dim], L2-normalised


@dataclass
class EncodeOutput:
    embeddings: np.ndarray  # float32 [n, dim]; rows of failed items are NaN
    tokens: list[int]
    truncated: list[bool]
    errors: dict[int, FailureKind] = field(default_factory=dict)  # input position -> failure kind
    spans: dict[int, np.ndarray] = field(default_factory=dict)  # position -> [n_spans, dim], when asked for
    real_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)  # rows per forward pass that succeeded


class BatchEncoder:
    """Subclasses set `dim`, `max_length`, `device_type`, `dtype_name` and implement the abstract methods."""

    dim: int
    max_length: int
    device_type: str = "cpu"
    dtype_name: str = "float32"

    def __init__(self, max_batch_tokens: int, max_batch_size: int = 256, pad_multiple: int = 1):
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size
        self.pad_multiple = pad_multiple

    # --- what a subclass provides -------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids (truncated at max_length) and a truncation flag per text."""
        raise NotImplementedError

    def tokenize_with_offsets(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool], list[list]]:
        """Also each token's (start, end) characters in its text; special tokens carry (0, 0)."""
        raise NotImplementedError

    def forward(self, batch_ids: Sequence[Sequence[int]], width: int, spans: Sequence[Spans] | None = None):
        """Pads to `width`, runs the model, pools: a ForwardOutput."""
        raise NotImplementedError

    @property
    def identity(self) -> str:
        """What the outputs depend on besides the weights file (keys caches of computed prototypes)."""
        return f"{type(self).__name__}:{self.dtype_name}"

    def is_oom(self, exc: BaseException) -> bool:
        text = str(exc)
        return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text

    def is_fatal(self, exc: BaseException) -> bool:
        return False

    def after_oom(self) -> None:
        """Give memory back before the halves run (the CUDA cache)."""

    def with_budget(self, max_batch_tokens: int) -> BatchEncoder:
        raise NotImplementedError

    def for_isolation(self) -> BatchEncoder:
        """One item per forward pass in float32 (the retry's encoder): a bad item cannot take others
        down, and a NaN that came from half precision does not come back."""
        raise NotImplementedError

    # --- the loop -----------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> EncodeOutput:
        ids, truncated = self.tokenize(texts)
        return self.encode_ids(ids, truncated)

    def encode_ids(
        self,
        ids: Sequence[Sequence[int]],
        truncated: Sequence[bool] | None = None,
        spans: Sequence[Spans] | None = None,
    ) -> EncodeOutput:
        """`spans`: per item, token ranges to pool too (sentences, for the summary head), from the same
        forward pass as the item's embedding."""
        lengths = [len(x) for x in ids]
        out = EncodeOutput(
            embeddings=np.full((len(ids), self.dim), np.nan, dtype=np.float32),
            tokens=lengths,
            truncated=list(truncated) if truncated is not None else [False] * len(ids),
        )
        started = time.perf_counter()
        for batch in plan_batches(lengths, self.max_batch_tokens, self.max_batch_size, self.pad_multiple):
            self._run(batch, ids, out, spans)
        out.seconds = time.perf_counter() - started
        out.real_tokens = sum(lengths)
        return out

    def _run(self, batch: Batch, ids: Sequence[Sequence[int]], out: EncodeOutput, spans) -> None:
        try:
            batch_spans = None if spans is None else [spans[i] for i in batch.indices]
            result = self.forward([ids[i] for i in batch.indices], batch.padded_length, spans=batch_spans)
        except Exception as exc:  # noqa: BLE001 - every failure is typed below; the device kind re-raises
            if self.is_fatal(exc):
                raise DeviceBroken(f"device failure ({type(exc).__name__}); the task must restart") from None
            oom = self.is_oom(exc)
            if oom:
                self.after_oom()
            if len(batch.indices) == 1:
                out.errors[batch.indices[0]] = FailureKind.OOM if oom else FailureKind.MODEL_ERROR
                return
            half = len(batch.indices) // 2
            for part in (batch.indices[:half], batch.indices[half:]):
                width = round_up(max(max(len(ids[i]) for i in part), 1), self.pad_multiple)
                self._run(Batch(part, width), ids, out, spans)
            return
        out.padded_tokens += batch.padded_tokens
        out.batch_sizes.append(len(batch.indices))
        finite = np.isfinite(result.embeddings).all(axis=1)
        for row, i in enumerate(batch.indices):
            if not finite[row] or (result.spans is not None and not np.isfinite(result.spans[row]).all()):
                out.errors[i] = FailureKind.NAN_OUTPUT
                continue
            out.embeddings[i] = result.embeddings[row]
            if result.spans is not None:
                out.spans[i] = result.spans[row]
