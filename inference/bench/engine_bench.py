"""Our engine against the usual ways of running the same model on the same texts, in one process.

(a) one ticket per forward pass, (b) fixed batches of 32 in arrival order padded to the batch's
longest, (c) sentence-transformers `encode(batch_size=32)` (sorts by character length), (d) ours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from inference.engine.batching import padding_efficiency, plan_batches
from inference.engine.encoder import Encoder


@dataclass
class Result:
    name: str
    texts: int
    seconds: float
    real_tokens: int
    padded_tokens: int
    embeddings: np.ndarray | None = None

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.real_tokens / self.seconds

    @property
    def padding_efficiency(self) -> float:
        return self.real_tokens / self.padded_tokens if self.padded_tokens else 1.0

    def row(self) -> dict:
        return {
            "name": self.name,
            "texts": self.texts,
            "seconds": round(self.seconds, 3),
            "texts_per_s": round(self.texts_per_s, 2),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "padding_efficiency": round(self.padding_efficiency, 4),
        }


def _timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def _hf_pass(tokenizer, encoder: Encoder, batch: Sequence[str]) -> tuple[np.ndarray, int, int]:
    """The plain Hugging Face way: the tokenizer pads the batch, the model runs, mean pooling."""
    lm = encoder.loaded
    enc = tokenizer(list(batch), padding=True, truncation=True, max_length=lm.max_length, return_tensors="pt")
    with torch.inference_mode():
        hidden = lm.model(input_ids=enc["input_ids"].to(lm.device), attention_mask=enc["attention_mask"].to(lm.device))
        mask = enc["attention_mask"].to(lm.device).unsqueeze(-1).to(hidden.last_hidden_state.dtype)
        pooled = (hidden.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        emb = F.normalize(pooled.float(), dim=1).cpu().numpy()
    return emb, int(enc["attention_mask"].sum()), int(enc["attention_mask"].numel())


def hf_tokenizer(model_dir: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir, local_files_only=True, trust_remote_code=False)


def one_per_forward(tokenizer, encoder: Encoder, texts: Sequence[str]) -> Result:
    real = padded = 0
    started = time.perf_counter()
    rows = []
    for text in texts:
        emb, r, p = _hf_pass(tokenizer, encoder, [text])
        rows.append(emb)
        real, padded = real + r, padded + p
    return Result("one ticket per forward", len(texts), time.perf_counter() - started, real, padded, np.vstack(rows))


def fixed_batches(tokenizer, encoder: Encoder, texts: Sequence[str], size: int = 32) -> Result:
    real = padded = 0
    started = time.perf_counter()
    rows = []
    for k in range(0, len(texts), size):
        emb, r, p = _hf_pass(tokenizer, encoder, texts[k : k + size])
        rows.append(emb)
        real, padded = real + r, padded + p
    name = f"fixed batches of {size}, arrival order"
    return Result(name, len(texts), time.perf_counter() - started, real, padded, np.vstack(rows))


def sentence_transformers(
    model_dir: str, texts: Sequence[str], encoder: Encoder, batch_size: int = 32, repeat: int = 1
) -> Result:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise RuntimeError("the benchmark compares with sentence-transformers: pip install -e '.[test]'") from exc
    st = SentenceTransformer(model_dir, device=str(encoder.loaded.device))
    st.max_seq_length = encoder.loaded.max_length
    st.encode(list(texts[:64]), batch_size=batch_size)  # warm-up, as for every contender
    runs = [
        _timed(lambda: st.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False))
        for _ in range(max(1, repeat))
    ]
    emb, seconds = min(runs, key=lambda r: r[1])  # best of `repeat`, as for ours
    # Its padding, reconstructed: sorted by character length, batches of 32, padded to each batch's longest.
    lengths = [len(x) for x in encoder.tokenize(texts)[0]]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    padded = sum(
        max(lengths[i] for i in order[k : k + batch_size]) * len(order[k : k + batch_size])
        for k in range(0, len(order), batch_size)
    )
    name = f"sentence-transformers encode(batch_size={batch_size})"
    return Result(name, len(texts), seconds, sum(lengths), padded, emb)


def ours(encoder: Encoder, texts: Sequence[str], chunk: int, repeat: int = 1) -> Result:
    """What infer_shard does per chunk: tokenize once, sort, token-budget batches. Best of `repeat`."""
    runs = [_ours_once(encoder, texts, chunk) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: r.seconds)


def _ours_once(encoder: Encoder, texts: Sequence[str], chunk: int) -> Result:
    real = padded = 0
    rows = []
    started = time.perf_counter()
    for k in range(0, len(texts), chunk):
        out = encoder.encode(texts[k : k + chunk])
        rows.append(out.embeddings)
        real, padded = real + out.real_tokens, padded + out.padded_tokens
    seconds = time.perf_counter() - started
    name = f"ours (budget {encoder.max_batch_tokens} tokens, chunk {chunk})"
    return Result(name, len(texts), seconds, real, padded, np.vstack(rows))


def budget_sweep(encoder: Encoder, texts: Sequence[str], budgets: Sequence[int], chunk: int) -> list[dict]:
    """texts/s and padding efficiency per token budget on the same texts (the tuning table)."""
    out = []
    for budget in budgets:
        enc = Encoder(encoder.loaded, budget, encoder.max_batch_size, encoder.pad_multiple)
        enc.encode(texts[:64])
        result = ours(enc, texts, chunk)
        out.append({"max_batch_tokens": budget, **result.row()})
    return out


def cosine_min(a: np.ndarray, b: np.ndarray) -> float:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return float(F.cosine_similarity(ta, tb, dim=1).min())


def padding_of_plan(lengths: Sequence[int], budget: int, size: int, multiple: int) -> float:
    return padding_efficiency(lengths, plan_batches(lengths, budget, size, multiple))
