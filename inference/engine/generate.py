"""Abstractive summaries from any local seq2seq or causal language model (safetensors, no remote code).

Decoder-only models are padded on the left, so every prompt ends where generation starts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from inference.engine.model import resolve_device
from inference.modelinfo import ModelUnavailable, check_model_dir

log = logging.getLogger("inference")
PROMPT = "Summarize this support ticket in one sentence.\n\nTicket: {text}\n\nSummary:"


class Summarizer:
    def __init__(self, model_dir: str, device: str, max_new_tokens: int = 64, max_input_tokens: int = 512):
        path = check_model_dir(model_dir)
        hf_logging.disable_progress_bar()
        config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
        self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
        family = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
        try:
            model = family.from_pretrained(path, local_files_only=True, trust_remote_code=False, use_safetensors=True)
        except ValueError as exc:
            raise ModelUnavailable(f"summary model {model_dir} is neither a seq2seq nor a causal LM: {exc}") from None
        self.device = resolve_device(device)
        self.model = model.to(self.device).eval()
        if not self.seq2seq:
            self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.max_new_tokens = max_new_tokens
        self.max_input_tokens = max_input_tokens

    def _generate(self, texts: Sequence[str]) -> list[str]:
        prompts = list(texts) if self.seq2seq else [PROMPT.format(text=t) for t in texts]
        enc = self.tokenizer(
            prompts, padding=True, truncation=True, max_length=self.max_input_tokens, return_tensors="pt"
        ).to(self.device)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=enc["input_ids"],
                attention_mask=enc["attention_mask"],
                max_new_tokens=self.max_new_tokens,
                min_new_tokens=min(4, self.max_new_tokens),
                do_sample=False,
                num_beams=1,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        if not self.seq2seq:
            out = out[:, enc["input_ids"].shape[1] :]
        return [s.strip() for s in self.tokenizer.batch_decode(out, skip_special_tokens=True)]

    def __call__(self, texts: Sequence[str], batch_size: int = 16) -> list[str | None]:
        """One summary per text (None where generation failed even alone); batches of similar length."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[str | None] = [None] * len(texts)
        for k in range(0, len(order), batch_size):
            part = order[k : k + batch_size]
            try:
                for i, summary in zip(part, self._generate([texts[i] for i in part]), strict=True):
                    out[i] = summary
            except Exception as exc:  # noqa: BLE001 - isolate: retry the batch's items one by one
                log.warning("summary generation failed for a batch (%s); retrying its items alone", type(exc).__name__)
                for i in part:
                    try:
                        out[i] = self._generate([texts[i]])[0]
                    except Exception:  # noqa: BLE001 - the item fails alone, typed by the caller
                        out[i] = None
        return out
