"""One encoder pass over many texts: tokenize once, sort, batch under a token budget, pool.

Item failures never fail the call: a batch that runs out of memory or raises is split in halves
until the single bad item is isolated; its row comes back as NaN with a typed error, the rest
succeed. Errors that mean the device itself is broken are re-raised, so the task process exits
and Airflow retries it in a fresh process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from inference.engine.batching import Batch, plan_batches
from inference.engine.model import LoadedModel
from inference.errors import DeviceBroken
from inference.records import FailureKind

DEFAULT_BATCH_TOKENS = {"cpu": 1024, "cuda": 65536}  # CPU: measured, BENCHMARKS.md (token budget sweep)
_FATAL_DEVICE_MARKERS = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "illegal memory access", "NCCL")


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


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc)
    return "out of memory" in text or "can't allocate memory" in text


def _is_fatal(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _FATAL_DEVICE_MARKERS) and not _is_oom(exc)


class Encoder:
    """Loads nothing itself: give it a LoadedModel once, then call encode() per chunk."""

    def __init__(
        self,
        loaded: LoadedModel,
        max_batch_tokens: int | None = None,
        max_batch_size: int = 256,
        pad_multiple: int | None = None,
    ):
        self.loaded = loaded
        kind = loaded.device.type
        self.max_batch_tokens = max_batch_tokens or DEFAULT_BATCH_TOKENS.get(kind, 1024)
        self.max_batch_size = max_batch_size
        self.pad_multiple = pad_multiple or (8 if kind == "cuda" else 1)

    def calibrate(self, start: int = 1 << 18) -> int:
        """CUDA warm-up: the largest token budget (halving from `start`) whose worst-case batch
        (every row at the maximum length) runs without running out of memory. Sets and returns it."""
        length = self.loaded.max_length
        budget = max(start, length)
        while budget > length:
            rows = max(1, budget // length)
            try:
                self.forward([[self.loaded.pad_id + 1] * length] * rows, length)
                break
            except Exception as exc:  # noqa: BLE001 - only out-of-memory lowers the budget
                if not _is_oom(exc):
                    raise
                torch.cuda.empty_cache()
                budget //= 2
        self.max_batch_tokens = budget
        return budget

    @property
    def dim(self) -> int:
        return self.loaded.dim

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        encodings = self.loaded.tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings], [bool(e.overflowing) for e in encodings]

    def encode(self, texts: Sequence[str]) -> EncodeOutput:
        ids, truncated = self.tokenize(texts)
        return self.encode_ids(ids, truncated)

    def tokenize_with_offsets(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool], list[list]]:
        """Token ids, truncation flags and each token's (start, end) characters in its text."""
        encodings = self.loaded.tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings], [bool(e.overflowing) for e in encodings], [e.offsets for e in encodings]

    def encode_ids(
        self,
        ids: Sequence[Sequence[int]],
        truncated: Sequence[bool] | None = None,
        spans: Sequence[Sequence[tuple[int, int]]] | None = None,
    ) -> EncodeOutput:
        """`spans`: per item, token ranges [start, end) to pool too (sentences, for the summary head),
        from the same forward pass as the item's embedding."""
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

    def _run(self, batch: Batch, ids: Sequence[Sequence[int]], out: EncodeOutput, spans=None) -> None:
        try:
            batch_ids = [ids[i] for i in batch.indices]
            if spans is None:
                emb, span_emb = self.forward(batch_ids, batch.padded_length), None
            else:
                emb, span_emb = self.forward(batch_ids, batch.padded_length, spans=[spans[i] for i in batch.indices])
        except Exception as exc:  # noqa: BLE001 - every failure is typed below; the device kind re-raises
            if _is_fatal(exc):
                raise DeviceBroken(f"device failure ({type(exc).__name__}); the task must restart") from None
            if _is_oom(exc) and self.loaded.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(batch.indices) == 1:
                out.errors[batch.indices[0]] = FailureKind.OOM if _is_oom(exc) else FailureKind.MODEL_ERROR
                return
            half = len(batch.indices) // 2
            for part in (batch.indices[:half], batch.indices[half:]):
                width = max(len(ids[i]) for i in part)
                self._run(Batch(part, -(-width // self.pad_multiple) * self.pad_multiple), ids, out, spans)
            return
        out.padded_tokens += batch.padded_tokens
        finite = np.isfinite(emb).all(axis=1)
        for row, i in enumerate(batch.indices):
            if not finite[row] or (span_emb is not None and not np.isfinite(span_emb[row]).all()):
                out.errors[i] = FailureKind.NAN_OUTPUT
                continue
            out.embeddings[i] = emb[row]
            if span_emb is not None:
                out.spans[i] = span_emb[row]

    def forward(self, batch_ids: Sequence[Sequence[int]], width: int, spans=None):
        """Pads to `width`, runs the model, mean-pools over real tokens, L2-normalises (float32, CPU).

        With `spans` (per row, token ranges), also returns per row the L2-normalised mean of each
        range's hidden states: (embeddings, [array [n_spans, dim] per row]).
        """
        lm = self.loaded
        input_ids = np.full((len(batch_ids), width), lm.pad_id, dtype=np.int64)
        mask = np.zeros((len(batch_ids), width), dtype=np.int64)
        for row, seq in enumerate(batch_ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        with torch.inference_mode():
            ids_t, mask_t = torch.from_numpy(input_ids), torch.from_numpy(mask)
            if lm.device.type == "cuda":  # pinned host memory: the copy overlaps with queued GPU work
                ids_t = ids_t.pin_memory().to(lm.device, non_blocking=True)
                mask_t = mask_t.pin_memory().to(lm.device, non_blocking=True)
            hidden = lm.model(input_ids=ids_t, attention_mask=mask_t).last_hidden_state
            weights = mask_t.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            pooled = F.normalize(pooled.float(), p=2, dim=1).cpu().numpy()
            if spans is None:
                return pooled
            return pooled, _pool_spans(hidden, spans)


def _pool_spans(hidden: torch.Tensor, spans) -> list[np.ndarray]:
    """Mean of hidden states over each [start, end) token range, by prefix sums (one gather per batch)."""
    rows, starts, ends = [], [], []
    for row, row_spans in enumerate(spans):
        for start, end in row_spans:
            rows.append(row)
            starts.append(start)
            ends.append(end)
    dim = hidden.shape[-1]
    if not rows:
        return [np.zeros((0, dim), dtype=np.float32) for _ in spans]
    prefix = torch.nn.functional.pad(hidden.float().cumsum(dim=1), (0, 0, 1, 0))  # [B, W+1, D]
    r = torch.tensor(rows, device=hidden.device)
    s = torch.tensor(starts, device=hidden.device)
    e = torch.tensor(ends, device=hidden.device)
    sums = prefix[r, e] - prefix[r, s]
    means = F.normalize(sums / (e - s).clamp(min=1).unsqueeze(-1).float(), p=2, dim=1).cpu().numpy()
    out, k = [], 0
    for row_spans in spans:
        out.append(means[k : k + len(row_spans)])
        k += len(row_spans)
    return out
