"""Settings of the Batch API backend: typed and validated; the values come from the caller.

The environment variables are declared where every setting is (inference/config.py, by whoever wires the
backend in); the CLI's `batch-file` command passes its flags. The API key is not a setting: under
Airflow it comes from the connection named by `conn_id` (password = key, host = base URL of an
OpenAI-compatible provider); offline runs need none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.errors import ConfigError

ENDPOINT = "/v1/chat/completions"  # what OpenAI, compatible providers and vLLM's run-batch all accept
COMPLETION_WINDOW = "24h"
DEFAULT_PROMPT = (
    "Summarise the customer support ticket below in one sentence of at most 30 words, in the ticket's "
    "language. Reply with the summary only."
)
# OpenAI's documented limits are 50,000 requests and 200 MB per batch input file; the byte limit keeps
# room for a file rebuilt after a crash with tickets edited in between.
MAX_REQUESTS, MAX_BYTES = 50_000, 190_000_000


@dataclass(frozen=True)
class BatchSettings:
    model: str
    prompt: str = DEFAULT_PROMPT
    max_tokens: int = 120  # output tokens per summary
    max_chars: int = 12_000  # ticket text cut here (and the result flagged truncated)
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"temperature": 0}
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    retry_max_requests: int = 1_000  # retry rounds go out in smaller batches
    poll_seconds: float = 60.0
    deadline_grace_seconds: int = 3_600  # past the provider's expires_at, stop waiting and cancel
    price_input_per_mtok: float | None = None  # USD per million tokens at the provider's batch price
    price_output_per_mtok: float | None = None
    delete_files: bool = True  # delete input/output/error files at the provider once collected
    conn_id: str = "openai_default"  # the Airflow connection (read by the plugin only)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("the batch model must name the provider's model, e.g. gpt-4o-mini")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ConfigError("the batch prompt must not be empty")
        _check_int("max_tokens", self.max_tokens, 1, 32_768)
        _check_int("max_chars", self.max_chars, 100, 1_000_000)
        _check_int("max_requests", self.max_requests, 1, MAX_REQUESTS)
        _check_int("max_bytes", self.max_bytes, 10_000, 200_000_000)
        _check_int("retry_max_requests", self.retry_max_requests, 1, MAX_REQUESTS)
        _check_int("deadline_grace_seconds", self.deadline_grace_seconds, 0, 7 * 86_400)
        if isinstance(self.poll_seconds, bool) or not 0.01 <= float(self.poll_seconds) <= 3_600:
            raise ConfigError(f"batch setting poll_seconds must be from 0.01 to 3600, got {self.poll_seconds!r}")
        for name in ("price_input_per_mtok", "price_output_per_mtok"):
            price = getattr(self, name)
            if price is not None and (isinstance(price, bool) or not 0 <= price < 10_000):
                raise ConfigError(f"batch setting {name} must be a price in USD per million tokens, got {price!r}")
        if not isinstance(self.extra_body, Mapping):
            raise ConfigError('batch setting extra_body must be a JSON object such as {"temperature": 0}')
        clash = sorted({"model", "messages", "max_completion_tokens", "stream"} & set(self.extra_body))
        if clash:
            raise ConfigError(f"batch setting extra_body may not set {', '.join(clash)}: they are settings")

    def part_limit(self, retry_round: int) -> int:
        """Requests per file: retry rounds go out in smaller batches."""
        return self.max_requests if retry_round == 0 else min(self.max_requests, self.retry_max_requests)

    def body(self, text: str) -> dict[str, Any]:
        """One request's body: the configured prompt as the system message, the ticket as the user's."""
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": self.prompt}, {"role": "user", "content": text}],
            "max_completion_tokens": self.max_tokens,
            **self.extra_body,
        }

    def fingerprint(self) -> dict[str, Any]:
        """What changes the summaries (for the model version): model, prompt, limits, extra parameters."""
        config = {
            "endpoint": ENDPOINT,
            "model": self.model,
            "prompt": self.prompt,
            "max_tokens": self.max_tokens,
            "max_chars": self.max_chars,
            "extra_body": dict(self.extra_body),
        }
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
        return {"summary_backend": "batch_api", "batch_model": self.model, "batch_config": digest[:16]}


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"batch setting {name} must be an integer from {low} to {high}, got {value!r}")


def read_prompt(path: str) -> str:
    """A prompt kept in a file (UTF-8)."""
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"the batch prompt file {path} cannot be read ({type(exc).__name__})") from None


def parse_extra_body(text: str) -> dict[str, Any]:
    """Extra request parameters as JSON text (e.g. '{"temperature": 0}')."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError('the batch extra body must be a JSON object such as {"temperature": 0}')
    return value
