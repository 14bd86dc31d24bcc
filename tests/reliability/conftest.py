"""Shared helpers for the reliability tests: tickets in, rows out, and a spy on what reaches the model.

The fixtures of tests/conftest.py (pg_engine, sqlite_engine, db_engine, model, airflow_db) are used as is.
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.store.db import writing
from inference.store.schema import (
    inference_run_items,
    inference_runs,
    inference_staging,
    ticket_failures,
    ticket_results,
    tickets,
)
from inference.textprep import max_chars_for, model_input
from inference.window import window_for_date

# The test modules import these helpers as `tests.reliability.conftest`, also under a bare `pytest`.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DAY1 = dt.date(2026, 11, 29)
DAY2 = dt.date(2026, 11, 30)
W1 = window_for_date(DAY1)
W2 = window_for_date(DAY2)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Batches here are a handful of short tickets: one intra-op thread is as fast, and it keeps CPU
    time sane when the machine is shared (OpenMP threads spin-wait badly on oversubscribed cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def settings_for(engine: sa.Engine, **overrides) -> Settings:
    """Settings pointing at this engine's database; small chunks so a few tickets still span several."""
    url = engine.url.render_as_string(hide_password=False)
    values = dict(db_url=url, device="cpu", chunk_size=4)
    values.update(overrides)
    return Settings(**values)


def add_ticket(
    engine: sa.Engine, ticket_id: int, subject: str | None, body: str | None, at: dt.datetime | None = None
) -> dt.datetime:
    """Inserts one ticket created (and last updated) at `at` (default: 3 h into W2); returns `at`."""
    at = at or W2.start + dt.timedelta(hours=3)
    with writing(engine) as conn:
        conn.execute(
            sa.insert(tickets),
            [dict(ticket_id=ticket_id, subject=subject, body=body, created_at=at, updated_at=at)],
        )
    return at


def edit_ticket(engine: sa.Engine, ticket_id: int, body: str, updated_at: dt.datetime) -> None:
    with writing(engine) as conn:
        n = conn.execute(
            sa.update(tickets).where(tickets.c.ticket_id == ticket_id).values(body=body, updated_at=updated_at)
        ).rowcount
    assert n == 1


def results(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def source(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}


def items(engine: sa.Engine, run_id: str | None = None) -> dict[str, sa.Row]:
    stmt = sa.select(inference_run_items)
    if run_id is not None:
        stmt = stmt.where(inference_run_items.c.run_id == run_id)
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(stmt)}


def failures(engine: sa.Engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(ticket_failures).order_by(ticket_failures.c.ticket_id)))


def count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return conn.scalar(sa.select(sa.func.count()).select_from(table))


def written_anything(engine: sa.Engine) -> dict[str, int]:
    """Row counts of every table the pipeline writes (all zero means: nothing was written)."""
    tables = (inference_runs, inference_run_items, inference_staging, ticket_results, ticket_failures)
    return {t.name: count(engine, t) for t in tables}


def expected_model_text(subject: str | None, body: str | None, max_seq_length: int = 256) -> str | None:
    return model_input(subject, body, max_chars_for(max_seq_length))[0]


class EncodeSpy:
    """Every text handed to the Encoder's tokenizing methods (tokenize, tokenize_with_offsets, ...), in call
    order: text reaches the model only through them (encode tokenizes too, and infer_shard tokenizes ahead
    of the model on its prefetch thread). A tokenizing method calling another is recorded once."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.local = threading.local()

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def wrap(self, real):
        @functools.wraps(real)
        def tokenizing(encoder, texts, *args, **kwargs):
            outermost = not getattr(self.local, "inside", False)
            if outermost:
                self.calls.append(list(texts))
            self.local.inside = True
            try:
                return real(encoder, texts, *args, **kwargs)
            finally:
                self.local.inside = not outermost

        return tokenizing


@pytest.fixture
def encoded(monkeypatch) -> EncodeSpy:
    spy = EncodeSpy()
    names = [name for name in vars(Encoder) if name.startswith("tokenize") and callable(vars(Encoder)[name])]
    assert "tokenize" in names
    for name in names:
        monkeypatch.setattr(Encoder, name, spy.wrap(vars(Encoder)[name]))
    return spy
