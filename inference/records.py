"""The nouns every layer shares: a source ticket, a failure, a staged result, a shard, step summaries.

The store reads and writes these; the pipeline passes them along; XCom and the CLI see only their
`as_dict()` (IDs, counts and timings, never ticket text or outputs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class FailureKind(StrEnum):
    """Why one ticket failed: the `error_class` of its failures row."""

    OOM = "oom"  # the item's batch ran out of memory even alone
    NAN_OUTPUT = "nan_output"  # the model produced NaN/inf (retried in float32)
    MODEL_ERROR = "model_error"  # the model (or a head) raised on this item alone
    INVALID_OUTPUT = "invalid_output"  # the output failed validation before upsert
    STALE_INPUT = "stale_input"  # the ticket was edited after its text was read: redo with the new text
    PROCESS_CRASH = "process_crash"  # the worker died with this ticket in the model, INFERENCE_MAX_ATTEMPTS times
    BATCH_REQUEST_ERROR = "batch_request_error"  # a provider's batch answered this request with an error
    BATCH_EXPIRED = "batch_expired"  # the batch expired (or was cancelled) before this request ran
    BATCH_MISSING = "batch_missing"  # the ended batch returned no usable line for this request
    UNSUPPORTED_ID = "unsupported_id"  # the source row's ID cannot be a key: NULL, or too long (see store/source.py)

    @property
    def retryable(self) -> bool:
        return self not in (FailureKind.PROCESS_CRASH, FailureKind.UNSUPPORTED_ID)

    @property
    def message(self) -> str:
        """The stored message: fixed text per kind, so nothing from the ticket can leak into it."""
        return _MESSAGES[self]


_MESSAGES = {
    FailureKind.OOM: "out of memory even as a batch of one",
    FailureKind.NAN_OUTPUT: "model output contained NaN or infinity",
    FailureKind.MODEL_ERROR: "model raised on this item alone",
    FailureKind.INVALID_OUTPUT: "output failed validation",
    FailureKind.STALE_INPUT: "ticket changed after its text was read",
    FailureKind.PROCESS_CRASH: "the worker process died while this ticket was in the model",
    FailureKind.BATCH_REQUEST_ERROR: "the batch provider answered this request with an error",
    FailureKind.BATCH_EXPIRED: "the batch expired or was cancelled before this request ran",
    FailureKind.BATCH_MISSING: "the ended batch returned no usable result for this request",
    FailureKind.UNSUPPORTED_ID: "the source row's ticket ID is NULL or longer than 512 bytes: it cannot be stored",
}


class SkipReason(StrEnum):
    """Why a backlog ticket needed no model output: the `reason` of a skipped item."""

    EMPTY_INPUT = "empty_input"  # nothing to embed: NULL, empty or whitespace-only subject and body
    DELETED = "deleted"  # the ticket was deleted after planning
    SUPERSEDED = "superseded"  # a newer version of the ticket already has its result
    MODEL_OUTDATED = "model_outdated"  # a result of the current model version is stored; this run's model is another


@dataclass(frozen=True, slots=True)
class SourceTicket:
    ticket_id: str
    subject: str | None
    body: str | None
    version_at: dt.datetime  # updated_at, or created_at where the source leaves updated_at NULL


@dataclass(frozen=True, slots=True)
class TicketInput:
    """A ticket as the model path reads it: the model input after the input policy (at most `max_chars`),
    never the whole text, plus the content hash of the whole raw subject and body."""

    ticket_id: str
    version_at: dt.datetime
    content_hash: str
    text: str | None  # None: nothing to embed (empty_input)
    cut: bool  # cut at max_chars before tokenizing
    row_version: str | None = None  # the source rows' versions when read (PostgreSQL tables; Source docs)


@dataclass(frozen=True, slots=True)
class SourceVersion:
    """What a ticket is now, without its text: the content hash of its current text and its version time."""

    content_hash: str
    version_at: dt.datetime

    def __reduce__(self):  # pickled as its fields in order (a writer process gets thousands per chunk)
        return SourceVersion, (self.content_hash, self.version_at)


@dataclass(frozen=True, slots=True)
class Failure:
    ticket_id: str
    content_hash: str
    kind: FailureKind
    message: str = ""  # a fixed text (the kind's own when empty); never ticket text

    def __post_init__(self) -> None:
        if not self.message:
            object.__setattr__(self, "message", self.kind.message)

    @property
    def retryable(self) -> bool:
        return self.kind.retryable


@dataclass(slots=True)
class StagedResult:
    """One ticket's outputs from one model pass, waiting in staging for load_results.

    `outputs` maps each configured head's columns to this ticket's values (see inference.heads).
    """

    run_id: str
    ticket_id: str
    content_hash: str
    source_updated_at: dt.datetime
    model_version: str
    truncated: bool
    input_tokens: int
    created_at: dt.datetime
    outputs: dict[str, Any] = field(default_factory=dict)

    _BASE = ("run_id", "ticket_id", "content_hash", "source_updated_at", "model_version", "truncated", "input_tokens")

    def __reduce__(self):
        """Pickled as its fields in order: a writer process (INFERENCE_WRITER=process) gets a chunk's worth at a
        time, and the generic state of a slotted dataclass costs a `fields()` walk per object each way."""
        return StagedResult, (
            self.run_id,
            self.ticket_id,
            self.content_hash,
            self.source_updated_at,
            self.model_version,
            self.truncated,
            self.input_tokens,
            self.created_at,
            self.outputs,
        )

    def to_row(self) -> dict[str, Any]:
        """The inference_staging row (head columns that were not computed stay NULL)."""
        row = {name: getattr(self, name) for name in self._BASE}
        row["created_at"] = self.created_at
        row.update(self.outputs)
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any], output_columns: tuple[str, ...]) -> StagedResult:
        return cls(
            **{name: row[name] for name in cls._BASE},
            created_at=row["created_at"],
            outputs={name: row.get(name) for name in output_columns},
        )


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """What plan hands each infer_shard task through XCom: IDs and counts only."""

    run_id: str
    shard: int
    tickets: int
    est_tokens: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, value: object, run_id: str) -> ShardSpec:
        """Refuses a descriptor of another run or of the wrong shape (XCom is not trusted blindly)."""
        if not isinstance(value, Mapping) or value.get("run_id") != run_id or not isinstance(value.get("shard"), int):
            raise ValueError(f"shard descriptor does not belong to run {run_id}")
        return cls(run_id, value["shard"], int(value.get("tickets") or 0), int(value.get("est_tokens") or 0))


@dataclass(slots=True)
class InferSummary:
    """infer_shard's (and each chunk's) counts and model metrics."""

    run_id: str
    shard: int
    staged: int = 0
    failed: int = 0
    skipped: int = 0
    loaded: int = 0  # of the staged, loaded by the task itself (infer_shard(load=True)) and now current
    real_tokens: int = 0
    padded_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class LoadSummary:
    run_id: str
    written: int = 0
    unchanged: int = 0  # the same result was already stored (a second load, a concurrent copy)
    superseded: int = 0  # a newer result of the ticket is stored
    invalid: int = 0  # failed validation or went stale: recorded as failures
    deleted: int = 0  # the ticket left the source
    outdated: int = 0  # a result of the current model version is stored and this run's model is another
    orphaned: int = 0  # staged rows with no run item: never written (finish_run's reconciliation fails)
    retracted: int = 0  # results removed because their ticket is no longer in the source

    def add(self, other: LoadSummary) -> None:
        for name in ("written", "unchanged", "superseded", "invalid", "deleted", "outdated", "orphaned", "retracted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def settled(self) -> int:
        return self.written + self.unchanged

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class RetrySummary:
    run_id: str
    passes: int = 0
    recovered: int = 0
    dead_letter: int = 0
    pending: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
