"""The torch encoder: tokenize with the model's fast tokenizer, run padded batches, pool as the model says
(mean, CLS or max: `inference.modelinfo.pooling_mode`), L2-normalise.

The batching loop, failure isolation and output type live in `inference.engine.base`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from inference.engine.base import BatchEncoder, EncodeOutput, ForwardOutput, Spans
from inference.engine.model import LoadedModel, load_model

__all__ = ["DEFAULT_BATCH_TOKENS", "EncodeOutput", "Encoder", "ForwardOutput"]

DEFAULT_BATCH_TOKENS = {"cpu": 1024, "cuda": 65536}  # CPU: measured, BENCHMARKS.md (token budget sweep)
_FATAL_DEVICE_MARKERS = ("CUDA error", "device-side assert", "CUBLAS_STATUS", "illegal memory access", "NCCL")


class Encoder(BatchEncoder):
    """Loads nothing itself: give it a LoadedModel once, then call encode() per chunk."""

    def __init__(
        self,
        loaded: LoadedModel,
        max_batch_tokens: int | None = None,
        max_batch_size: int = 256,
        pad_multiple: int | None = None,
        reload=None,
    ):
        """`reload(dtype)` loads the same weights in another dtype (for `for_isolation`)."""
        kind = loaded.device.type
        super().__init__(
            max_batch_tokens or DEFAULT_BATCH_TOKENS.get(kind, 1024),
            max_batch_size,
            pad_multiple or (8 if kind == "cuda" else 1),
        )
        self.loaded = loaded
        self.dim = loaded.dim
        self.max_length = loaded.max_length
        self.device_type = kind
        self.dtype_name = str(loaded.dtype).removeprefix("torch.")
        self._reload = reload

    @classmethod
    def from_settings(cls, settings, dtype: str | None = None) -> Encoder:
        def reload(new_dtype: str) -> LoadedModel:
            return load_model(
                settings.model_dir,
                settings.device,
                settings.max_seq_length,
                new_dtype,
                threads=settings.threads,
                quantize=settings.quantize,
                compile=settings.compile,
            )

        return cls(reload(dtype or settings.dtype), settings.max_batch_tokens, settings.max_batch_size, reload=reload)

    def with_budget(self, max_batch_tokens: int) -> Encoder:
        return Encoder(self.loaded, max_batch_tokens, self.max_batch_size, self.pad_multiple, self._reload)

    def for_isolation(self) -> Encoder:
        loaded = self.loaded
        if loaded.dtype != torch.float32:
            if self._reload is None:
                raise RuntimeError("this encoder cannot reload its weights in float32")
            loaded = self._reload("float32")
        return Encoder(loaded, self.max_batch_tokens, 1, self.pad_multiple, self._reload)

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
                if not self.is_oom(exc):
                    raise
                torch.cuda.empty_cache()
                budget //= 2
        self.max_batch_tokens = budget
        return budget

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, torch.OutOfMemoryError) or super().is_oom(exc)

    def is_fatal(self, exc: BaseException) -> bool:
        text = str(exc)
        return any(marker in text for marker in _FATAL_DEVICE_MARKERS) and not self.is_oom(exc)

    def after_oom(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.empty_cache()

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        encodings = self.loaded.tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings], [bool(e.overflowing) for e in encodings]

    def tokenize_with_offsets(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool], list[list]]:
        encodings = self.loaded.tokenizer.encode_batch(list(texts))
        return [e.ids for e in encodings], [bool(e.overflowing) for e in encodings], [e.offsets for e in encodings]

    def token_strings(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokenizer's token strings per text (the category head's readability signal)."""
        return [e.tokens for e in self.loaded.tokenizer.encode_batch(list(texts))]

    def forward(
        self, batch_ids: Sequence[Sequence[int]], width: int, spans: Sequence[Spans] | None = None
    ) -> ForwardOutput:
        """Pads to `width`, runs the model, pools over real tokens as the model is configured (mean, the
        CLS token, or max), L2-normalises (float32, CPU).

        With `spans` (per row, token ranges), also the L2-normalised mean of each range's hidden states
        (max over the range for max-pooling models; a sentence has no CLS token of its own, so CLS models
        get the mean there).
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
            pooled = _pool(hidden, mask_t, lm.pooling)
            pooled = F.normalize(pooled.float(), p=2, dim=1).cpu().numpy()
            span_mode = "max" if lm.pooling == "max" else "mean"
            return ForwardOutput(pooled, None if spans is None else _pool_spans(hidden, spans, span_mode))


def _pool(hidden: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """One vector per row from the token states [B, W, D] over the real tokens (mask 1)."""
    if mode == "cls":
        return hidden[:, 0]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    if mode == "max":
        floor = torch.finfo(hidden.dtype).min
        return hidden.masked_fill(weights == 0, floor).max(dim=1).values
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def _pool_spans(hidden: torch.Tensor, spans, mode: str = "mean") -> list[np.ndarray]:
    """Mean (by prefix sums, one gather per batch) or max of hidden states over each [start, end) token range."""
    rows, starts, ends = [], [], []
    for row, row_spans in enumerate(spans):
        for start, end in row_spans:
            rows.append(row)
            starts.append(start)
            ends.append(end)
    dim = hidden.shape[-1]
    if not rows:
        return [np.zeros((0, dim), dtype=np.float32) for _ in spans]
    if mode == "max":
        rows_max = [hidden[r, s:e].float().max(dim=0).values for r, s, e in zip(rows, starts, ends, strict=True)]
        means = F.normalize(torch.stack(rows_max), p=2, dim=1).cpu().numpy()
        out, k = [], 0
        for row_spans in spans:
            out.append(means[k : k + len(row_spans)])
            k += len(row_spans)
        return out
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
