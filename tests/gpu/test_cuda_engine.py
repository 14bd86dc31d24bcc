"""CUDA checks, run by benchmarks/gpu_check.sh on a GPU machine (`pytest -m gpu`); deselected elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.engine.model import load_model
from inference.seed import generate

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [t for t in (f"{s or ''}\n{b or ''}".strip() for _, s, b in generate(600, seed=3)) if t]


def _cos(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def cuda_fp32():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA device (run them through benchmarks/gpu_check.sh)")
    settings = Settings(device="cuda")
    return load_model(settings.model_dir, "cuda", settings.max_seq_length, "float32")


def test_batching_never_changes_a_result_on_cuda(cuda_fp32, texts):
    single = Encoder(cuda_fp32, 256, 1, 8).encode(texts)
    batched = Encoder(cuda_fp32, 65536, 1024, 8).encode(texts)
    assert single.errors == batched.errors == {}
    assert _cos(single.embeddings, batched.embeddings).min() >= 0.9999


def test_calibration_finds_a_budget_that_runs(cuda_fp32, texts):
    enc = Encoder(cuda_fp32, None, 4096, 8)
    budget = enc.calibrate(start=1 << 22)
    assert budget >= 256
    assert enc.encode(texts).errors == {}


def test_bf16_stays_close_to_fp32(cuda_fp32, texts):
    settings = Settings(device="cuda")
    bf16 = load_model(settings.model_dir, "cuda", settings.max_seq_length, "bfloat16")
    ref = Encoder(cuda_fp32, 65536, 1024, 8).encode(texts).embeddings
    half = Encoder(bf16, 65536, 1024, 8).encode(texts).embeddings
    cos = _cos(ref, half)
    print(f"bf16 vs fp32 cosine: min {cos.min():.6f} mean {cos.mean():.6f}")
    assert cos.min() >= 0.99


def test_auto_dtype_is_half_precision_on_cuda():
    import torch

    from inference.engine.model import resolve_dtype

    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    assert resolve_dtype("auto", torch.device("cuda")) is expected
