"""A deterministic encoder without a model: for fast tests of pipeline logic and the overhead benchmark.

Never a default: nothing in the pipeline builds it; a test or the benchmark injects it
(`inference.predictor.build_predictor(settings, StandInEncoder(...))`).

Tokens are words and punctuation (ids from a stable hash); a text's embedding is the normalised mean of
fixed random vectors of its tokens, so texts sharing words are close and the category head still works.
`on_forward(batch_ids, output)` is a fault hook: it may raise (an OOM, a model error, a broken device)
or change the output (NaN), and it sees exactly the batches the real encoder would run.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from inference.engine.base import BatchEncoder, ForwardOutput, Spans

CLS, SEP, FIRST_ID = 101, 102, 1000
_TOKEN = re.compile(r"\w+|[^\w\s]")
_VOCAB = 8192


class StandInEncoder(BatchEncoder):
    def __init__(
        self,
        dim: int = 384,
        max_length: int = 256,
        max_batch_tokens: int = 1024,
        max_batch_size: int = 256,
        on_forward: Callable[[Sequence[Sequence[int]], ForwardOutput], None] | None = None,
    ):
        super().__init__(max_batch_tokens, max_batch_size, 1)
        self.dim, self.max_length, self.on_forward = dim, max_length, on_forward
        table = np.random.default_rng(1234).standard_normal((_VOCAB, dim)).astype(np.float32)
        self._table = table
        self.forward_calls = 0

    def token_id(self, word: str) -> int:
        return FIRST_ID + zlib.crc32(word.lower().encode("utf-8", "surrogatepass")) % 30000

    def tokenize_with_offsets(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool], list[list]]:
        ids, truncated, offsets = [], [], []
        for text in texts:
            words = [(m.group(), m.span()) for m in _TOKEN.finditer(text)]
            keep = words[: self.max_length - 2]
            ids.append([CLS, *(self.token_id(w) for w, _ in keep), SEP])
            offsets.append([(0, 0), *(span for _, span in keep), (0, 0)])
            truncated.append(len(keep) < len(words))
        return ids, truncated, offsets

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        ids, truncated, _ = self.tokenize_with_offsets(texts)
        return ids, truncated

    def forward(
        self, batch_ids: Sequence[Sequence[int]], width: int, spans: Sequence[Spans] | None = None
    ) -> ForwardOutput:
        self.forward_calls += 1
        rows = []
        for seq in batch_ids:
            words = [t for t in seq if t not in (CLS, SEP)] or list(seq)
            rows.append(_unit(self._table[np.asarray(words) % _VOCAB].mean(axis=0)))
        out = ForwardOutput(np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.dim), np.float32))
        if spans is not None:
            out.spans = [
                np.stack([_unit(self._table[np.asarray(seq[a:b]) % _VOCAB].mean(axis=0)) for a, b in row_spans])
                if row_spans
                else np.zeros((0, self.dim), dtype=np.float32)
                for seq, row_spans in zip(batch_ids, spans, strict=True)
            ]
        if self.on_forward is not None:
            self.on_forward(batch_ids, out)
        return out

    def with_budget(self, max_batch_tokens: int) -> StandInEncoder:
        return self._copy(max_batch_tokens, self.max_batch_size)

    def for_isolation(self) -> StandInEncoder:
        return self._copy(self.max_batch_tokens, 1)

    def _copy(self, budget: int, size: int) -> StandInEncoder:
        clone = StandInEncoder.__new__(StandInEncoder)
        clone.__dict__.update(self.__dict__)
        clone.max_batch_tokens, clone.max_batch_size = budget, size
        return clone


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v
