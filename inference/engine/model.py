"""Loading a local Hugging Face encoder: safetensors only, no remote code, no network."""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from inference.modelinfo import ModelUnavailable, check_model_dir, pooling_mode  # noqa: E402


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: Tokenizer  # a private copy of the fast tokenizer: no padding, truncation at max_length
    device: torch.device
    dtype: torch.dtype
    max_length: int
    pad_id: int
    dim: int
    pooling: str = "mean"  # from the model's sentence-transformers configuration (modelinfo.pooling_mode)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ModelUnavailable("INFERENCE_DEVICE=cuda but torch sees no CUDA device: use auto or cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device | None = None) -> torch.dtype:
    """`auto`: bfloat16 on CUDA devices that support it, float16 on older ones, float32 on CPU (no
    bf16 units on most CPUs; half precision there is slower, not faster)."""
    if name == "auto":
        if device is not None and device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def cpu_threads(requested: int) -> int:
    """The cores this process may run on (cgroup/affinity aware), unless a number is asked for."""
    return requested or len(os.sched_getaffinity(0))


def load_model(
    model_dir: str,
    device: str,
    max_seq_length: int,
    dtype: str = "auto",
    *,
    threads: int = 0,
    quantize: str = "none",
    compile: bool = False,
) -> LoadedModel:
    path = check_model_dir(model_dir)
    pooling = pooling_mode(model_dir)
    hf_logging.disable_progress_bar()  # task logs want one line per event, not a progress bar
    hf_tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    if not hf_tokenizer.is_fast:
        raise ModelUnavailable(f"model directory {model_dir} has no fast tokenizer (tokenizer.json)")
    target = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, target)
    model = AutoModel.from_pretrained(
        path, local_files_only=True, trust_remote_code=False, use_safetensors=True, dtype=torch_dtype
    )
    model = model.to(target).eval()
    if target.type == "cpu":
        torch.set_num_threads(cpu_threads(threads))
    if quantize == "int8":
        if target.type != "cpu":
            raise ModelUnavailable("INFERENCE_QUANTIZE=int8 runs on CPU only: unset it for GPU workers")
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    if compile:
        model = torch.compile(model, dynamic=True)
    max_length = min(max_seq_length, getattr(model.config, "max_position_embeddings", max_seq_length))
    tokenizer = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else 0
    return LoadedModel(
        model, tokenizer, target, torch_dtype, max_length, pad_id, int(model.config.hidden_size), pooling
    )
