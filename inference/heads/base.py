"""What a head is: one output computed from the encoder pass, with its columns, version and checks.

A head module defines `HEAD = SomeHead()`, an instance of a `Head` subclass:
- `name` and `columns`: the nullable columns it fills in ticket_results (and inference_staging);
- `fingerprint(settings)`: everything besides the weights that changes its output (part of the model
  version, so a change reprocesses the backlog);
- `build(settings, encoder)`: loads what it needs once per task and returns a callable that turns an
  `EncodedChunk` into a `HeadOutput` (one dict of column values per item, plus per-item failures);
- `checker(settings)`: a check of one staged row before it is written (no model needed: load_results
  runs on CPU workers), returning a fixed-text reason or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np
    import sqlalchemy as sa

    from inference.config import Settings
    from inference.engine.base import BatchEncoder
    from inference.records import FailureKind

Checker = Callable[[Mapping[str, Any]], "str | None"]


class PageChecker:
    """A Checker that can check a page of rows at once (`page(rows)`: one reason or None per row), for checks
    that vectorize (the embedding's norms); called with one row, it checks a page of one: a single definition."""

    def __init__(self, page: Callable[[Sequence[Mapping[str, Any]]], list[str | None]]):
        self.page = page

    def __call__(self, row: Mapping[str, Any]) -> str | None:
        return self.page([row])[0]


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: sa.types.TypeEngine


@dataclass
class EncodedChunk:
    """The successfully encoded items of a chunk, in one order shared by every head."""

    texts: list[str]  # the model input (after the input policy)
    embeddings: np.ndarray  # float32 [n, dim], unit length
    sentences: list[list[tuple[int, int]]] | None = None  # character ranges of each item's sentences
    sentence_vectors: list[np.ndarray] | None = None  # per item, [n_sentences, dim] from the same pass
    shared: dict[Any, Any] = field(default_factory=dict)  # what heads derive from the chunk once and share

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class HeadOutput:
    values: list[dict[str, Any]]  # per item: column -> value
    errors: dict[int, FailureKind] = field(default_factory=dict)  # item position -> why it failed


class LoadedHead(Protocol):
    needs_sentences: bool  # ask the encoder for per-sentence vectors in the same forward pass

    def __call__(self, chunk: EncodedChunk) -> HeadOutput: ...


class Head:
    name: ClassVar[str]
    columns: ClassVar[Sequence[OutputColumn]]
    order: ClassVar[int] = 100  # position of its columns in the tables (built-ins first)

    def fingerprint(self, settings: Settings) -> dict[str, Any]:
        return {}

    def build(self, settings: Settings, encoder: BatchEncoder) -> LoadedHead:
        raise NotImplementedError

    def checker(self, settings: Settings) -> Checker:
        return lambda row: None

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)
