"""What plan checks before its first write (the tables, the run row, its items), so that a run that cannot
work is refused with nothing written: the model would load, the heads' configuration holds, the source is
reachable and shaped right. Without importing torch (plan runs on CPU workers) and without reading weights.

- the model: config.json parses and names an architecture (`model_type`) this transformers release has (with
  `trust_remote_code=False` nothing else can load), the tokenizer loads (tokenizer.json through `tokenizers`,
  or a vocab.txt), and every *.safetensors file has a readable header whose tensors fit in the file (a
  truncated copy is refused here, not by infer_shard after the run was recorded);
- the same for the abstractive summary model when that head uses one;
- the heads: their fingerprints (taxonomy, labelled examples, summary mode) are computed by the model version;
- the source: reflected (table and columns exist, types readable) by `Runtime.source`.
"""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

from inference.errors import ModelUnavailable

MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


def transformers_models_dir() -> Path | None:
    spec = importlib.util.find_spec("transformers")  # locates the package without importing it (nor torch)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def check_model_loadable(model_dir: str, setting: str = "INFERENCE_MODEL") -> None:
    path = Path(model_dir)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelUnavailable(f"model directory {model_dir}: config.json is missing or not valid JSON") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(model_type, str) or not model_type:
        raise ModelUnavailable(f"model directory {model_dir}: config.json names no model_type (architecture)")
    models = transformers_models_dir()
    if models is not None and models.is_dir() and not (models / model_type.replace("-", "_")).is_dir():
        raise ModelUnavailable(
            f"model directory {model_dir}: architecture {model_type!r} is unknown to the installed transformers "
            f"(custom code is never run: trust_remote_code=False): set {setting} to a model of a known architecture",
            remedy=f"set {setting} to a model directory of an architecture transformers ships (e.g. bert, roberta)",
        )
    _check_tokenizer(path, model_dir)
    for weights in sorted(path.glob("*.safetensors")):
        _check_safetensors(weights, model_dir)


def _check_tokenizer(path: Path, model_dir: str) -> None:
    if (path / "tokenizer.json").is_file():
        try:
            from tokenizers import Tokenizer

            Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001 - any failure to parse it means the model cannot be used
            raise ModelUnavailable(
                f"model directory {model_dir}: tokenizer.json does not load ({type(exc).__name__})"
            ) from None
        return
    if not any(
        (path / name).is_file() for name in ("vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")
    ):
        raise ModelUnavailable(f"model directory {model_dir}: no tokenizer files (tokenizer.json or a vocabulary)")


def _check_safetensors(weights: Path, model_dir: str) -> None:
    """The header parses and the largest tensor offset fits in the file."""
    size = weights.stat().st_size
    try:
        with weights.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length <= 0 or length > MAX_HEADER or 8 + length > size:
                raise ValueError("header length")
            header = json.loads(fh.read(length))
        end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        if 8 + length + end > size:
            raise ValueError("truncated")
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        raise ModelUnavailable(
            f"model directory {model_dir}: {weights.name} is not a complete safetensors file (truncated or corrupt)"
        ) from None


def check_before_first_write(settings, runtime) -> None:
    """Everything plan can check before it writes (see the module docstring)."""
    check_model_loadable(settings.model_dir)
    if "summary" in settings.heads and settings.summary == "abstractive" and settings.summary_model:
        if not Path(settings.summary_model).is_dir():
            raise ModelUnavailable(
                f"summary model directory {settings.summary_model} does not exist: set INFERENCE_SUMMARY_MODEL",
                remedy="set INFERENCE_SUMMARY_MODEL to a local seq2seq or causal LM directory, or INFERENCE_SUMMARY=extractive",
            )
        check_model_loadable(settings.summary_model, "INFERENCE_SUMMARY_MODEL")
    runtime.model_version  # noqa: B018 - the heads' fingerprints: taxonomy, examples, summary mode
    runtime.source  # noqa: B018 - the source table and its columns
