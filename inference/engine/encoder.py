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
from inference.errors import MODEL_ERROR, NAN_OUTPUT, OOM

DEFAULT_BATCH_TOKENS = {"cpu": 8192, "cuda": 65536}
_FATAL_DEVICE_MARKERS = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "illegal memory access", "NCCL")


class DeviceBroken(RuntimeError):
    """The accelerator is in a state no retry inside this process can fix."""


@dataclass
class EncodeOutput:
    embeddings: np.ndarray  # float32 [n, dim]; rows of failed items are NaN
    tokens: list[int]
    truncated: list[bool]
    errors: dict[int, str] = field(default_factory=dict)  # input position -> error class
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
        self.max_batch_tokens = max_batch_tokens or DEFAULT_BATCH_TOKENS.get(kind, 8192)
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

    def encode_ids(self, ids: Sequence[Sequence[int]], truncated: Sequence[bool] | None = None) -> EncodeOutput:
        lengths = [len(x) for x in ids]
        out = EncodeOutput(
            embeddings=np.full((len(ids), self.dim), np.nan, dtype=np.float32),
            tokens=lengths,
            truncated=list(truncated) if truncated is not None else [False] * len(ids),
        )
        started = time.perf_counter()
        for batch in plan_batches(lengths, self.max_batch_tokens, self.max_batch_size, self.pad_multiple):
            self._run(batch, ids, out)
        out.seconds = time.perf_counter() - started
        out.real_tokens = sum(lengths)
        return out

    def _run(self, batch: Batch, ids: Sequence[Sequence[int]], out: EncodeOutput) -> None:
        try:
            emb = self.forward([ids[i] for i in batch.indices], batch.padded_length)
        except Exception as exc:  # noqa: BLE001 - every failure is typed below; the device kind re-raises
            if _is_fatal(exc):
                raise DeviceBroken(f"device failure ({type(exc).__name__}); the task must restart") from None
            if _is_oom(exc) and self.loaded.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(batch.indices) == 1:
                out.errors[batch.indices[0]] = OOM if _is_oom(exc) else MODEL_ERROR
                return
            half = len(batch.indices) // 2
            for part in (batch.indices[:half], batch.indices[half:]):
                width = max(len(ids[i]) for i in part)
                self._run(Batch(part, -(-width // self.pad_multiple) * self.pad_multiple), ids, out)
            return
        out.padded_tokens += batch.padded_tokens
        finite = np.isfinite(emb).all(axis=1)
        for row, i in enumerate(batch.indices):
            if finite[row]:
                out.embeddings[i] = emb[row]
            else:
                out.errors[i] = NAN_OUTPUT

    def forward(self, batch_ids: Sequence[Sequence[int]], width: int) -> np.ndarray:
        """Pads to `width`, runs the model, mean-pools over real tokens, L2-normalises (float32, CPU)."""
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
            pooled = F.normalize(pooled.float(), p=2, dim=1)
            return pooled.cpu().numpy()
