"""Fault injection for real: a cuttable TCP proxy in front of PostgreSQL, infer_shard in a process the
test can SIGKILL, and plain views of the run tables. No database mocks; the real model and PostgreSQL.
The machinery lives in tests/support; these fixtures hand it to the tests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.config import Settings
from tests.support.concurrency import run_together
from tests.support.poison import poison_token_id as token_id_of_poison
from tests.support.proxy import PgProxy, Rule, nth_query
from tests.support.tables import DbView, Snapshot, committed_pages
from tests.support.tickets import seed_short_tickets
from tests.support.workers import ShardWorkers, worker_log

DAY = dt.date(2026, 11, 30)
WORKER = Path(__file__).with_name("shard_worker.py")


@pytest.fixture
def pg_settings(pg_engine, pg_url):
    """Settings on this session's PostgreSQL database (schema freshly reset by pg_engine)."""

    def make(**changes):
        return Settings(db_url=pg_url, device="cpu", **{"chunk_size": 10, **changes})

    return make


@pytest.fixture
def add_tickets(pg_engine):
    """add(n, days=(DAY,), seed=11): n short synthetic tickets over those nights; their IDs in ORDER BY order."""
    return lambda n, days=(DAY,), seed=11: seed_short_tickets(pg_engine, n, days, seed)


@pytest.fixture
def poison_token_id(model) -> int:
    return token_id_of_poison(model.encoder)


@pytest.fixture
def view(pg_engine) -> DbView:
    return DbView(pg_engine)


@pytest.fixture
def snapshot(pg_engine) -> Callable[[], Snapshot]:
    return lambda: Snapshot(pg_engine)


@pytest.fixture
def check_pages(view) -> Callable[[str, list[str], int], int]:
    return lambda run_id, order, page: committed_pages(view, run_id, order, page)


@pytest.fixture
def shard_worker(tmp_path):
    """start(settings, run_id, shard, **faults): tests/faults/shard_worker.py in its own process."""
    workers = ShardWorkers(WORKER, tmp_path)
    yield workers.start
    workers.stop()


@pytest.fixture
def read_worker_log():
    return worker_log


@pytest.fixture
def pg_proxy(pg_url):
    url = sa.make_url(pg_url)
    proxy = PgProxy(url.host or "127.0.0.1", url.port or 5432)
    yield proxy
    proxy.close()


@pytest.fixture
def query_rule() -> Callable[[bytes, int, str], Rule]:
    return nth_query


@pytest.fixture
def together():
    return run_together
