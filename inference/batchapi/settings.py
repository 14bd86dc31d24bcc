"""Settings of the Batch API backend: declared once (INFERENCE_BATCH_<FIELD>), typed and validated.

`Settings.batch` holds them (read from the environment with every other setting, inference/config.py);
the CLI's `batch-file` command passes its flags instead. The API key is not a setting: under Airflow it
comes from the connection named by `conn_id` (password = key, host = base URL of an OpenAI-compatible
provider); the CLI's `run` uses the SDK's own OPENAI_API_KEY / OPENAI_BASE_URL; offline runs need none.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.errors import ConfigError
from inference.settings_spec import check_fields, env, env_fields, values_from_env

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
    model: str = env(
        "INFERENCE_BATCH_MODEL",
        "",
        "INFERENCE_SUMMARY=batch_api: the provider's model, e.g. gpt-4o-mini; part of the model version",
        shown="none",
    )
    prompt: str = env(
        "INFERENCE_BATCH_PROMPT",
        DEFAULT_PROMPT,
        "Batch API: the system prompt of every summary request; part of the model version",
        shown="built in: one sentence of at most 30 words, in the ticket's language",
    )
    max_tokens: int = env(
        "INFERENCE_BATCH_MAX_TOKENS",
        120,
        "Batch API: output tokens per summary; part of the model version",
        low=1,
        high=32_768,
    )
    max_chars: int = env(
        "INFERENCE_BATCH_MAX_CHARS",
        12_000,
        "Batch API: characters of ticket text sent (longer text is cut and flagged truncated); part of the model version",
        low=100,
        high=1_000_000,
    )
    extra_body: Mapping[str, Any] = env(
        "INFERENCE_BATCH_EXTRA_BODY",
        None,
        'Batch API: a JSON object merged into each request body, e.g. {"temperature": 0}; part of the model version',
        kind=str,
        factory=dict,
    )
    max_requests: int = env(
        "INFERENCE_BATCH_MAX_REQUESTS", MAX_REQUESTS, "Batch API: requests per batch file", low=1, high=MAX_REQUESTS
    )
    max_bytes: int = env(
        "INFERENCE_BATCH_MAX_BYTES", MAX_BYTES, "Batch API: bytes per batch file", low=10_000, high=200_000_000
    )
    retry_max_requests: int = env(
        "INFERENCE_BATCH_RETRY_MAX_REQUESTS",
        1_000,
        "Batch API: requests per batch file in retry rounds (failed requests go out in smaller batches)",
        low=1,
        high=MAX_REQUESTS,
    )
    poll_seconds: float = env(
        "INFERENCE_BATCH_POLL_SECONDS",
        60.0,
        "Batch API: seconds between two polls of the run's batches",
        low=0.01,
        high=3_600.0,
    )
    deadline_grace_seconds: int = env(
        "INFERENCE_BATCH_DEADLINE_GRACE_SECONDS",
        3_600,
        "Batch API: how long past the provider's expiry to wait before cancelling (and again before abandoning) a batch",
        low=0,
        high=7 * 86_400,
    )
    price_input_per_mtok: float | None = env(
        "INFERENCE_BATCH_PRICE_INPUT_PER_MTOK",
        None,
        "Batch API: USD per million input tokens at the provider's batch price, for the run's cost (none: no cost figure)",
        kind=float,
        low=0.0,
        high=10_000.0,
    )
    price_output_per_mtok: float | None = env(
        "INFERENCE_BATCH_PRICE_OUTPUT_PER_MTOK",
        None,
        "Batch API: USD per million output tokens at the provider's batch price",
        kind=float,
        low=0.0,
        high=10_000.0,
    )
    delete_files: bool = env(
        "INFERENCE_BATCH_DELETE_FILES",
        True,
        "Batch API: delete the input, output and error files at the provider once collected",
    )
    conn_id: str = env(
        "INFERENCE_BATCH_CONN_ID",
        "openai_default",
        "Batch API: the Airflow connection (type openai: the key in its password, a compatible provider's base URL in its host)",
    )

    def __post_init__(self) -> None:
        if isinstance(self.extra_body, str):
            object.__setattr__(self, "extra_body", parse_extra_body(self.extra_body))
        elif self.extra_body is None:
            object.__setattr__(self, "extra_body", {})
        check_fields(self)
        if not isinstance(self.model, str) or (self.model and not self.model.strip()):
            raise ConfigError("INFERENCE_BATCH_MODEL must name the provider's model, e.g. gpt-4o-mini")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ConfigError("INFERENCE_BATCH_PROMPT must not be empty")
        if not isinstance(self.conn_id, str) or not self.conn_id.strip():
            raise ConfigError("INFERENCE_BATCH_CONN_ID must name an Airflow connection")
        if not isinstance(self.extra_body, Mapping):
            raise ConfigError('INFERENCE_BATCH_EXTRA_BODY must be a JSON object such as {"temperature": 0}')
        clash = sorted({"model", "messages", "max_completion_tokens", "stream"} & set(self.extra_body))
        if clash:
            raise ConfigError(f"INFERENCE_BATCH_EXTRA_BODY may not set {', '.join(clash)}: they are settings")

    def require_model(self) -> BatchSettings:
        """These settings, when they name a model (what sending requests needs)."""
        if not self.model:
            raise ConfigError(
                "INFERENCE_SUMMARY=batch_api needs INFERENCE_BATCH_MODEL (the provider's model, e.g. gpt-4o-mini)"
            )
        return self

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


def batch_from_env(environ: Mapping[str, str]) -> BatchSettings:
    return BatchSettings(**values_from_env(BatchSettings, environ))


BATCH_ENV = {name: spec.name for name, spec in env_fields(BatchSettings)}


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
        raise ConfigError('INFERENCE_BATCH_EXTRA_BODY (--extra-body) must be a JSON object such as {"temperature": 0}')
    return value
