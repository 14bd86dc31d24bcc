"""Fixtures of the reliability tests. Their helpers (tickets in, rows out) are in tests/support; the fixtures
of tests/conftest.py (pg_engine, sqlite_engine, db_engine, model, airflow_db) are used as is."""

from __future__ import annotations

import pytest

from tests.support.spies import EncodeSpy, spy_on_encoder


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Batches here are a handful of short tickets: one intra-op thread is as fast, and it keeps CPU
    time sane when the machine is shared (OpenMP threads spin-wait badly on oversubscribed cores)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def encoded(monkeypatch) -> EncodeSpy:
    """Every text that reaches the model during the test."""
    return spy_on_encoder(monkeypatch)
