"""Database faults during load_results on a real PostgreSQL: connections cut through a TCP proxy (mid-upsert,
mid-message, at COMMIT) and an error on the Nth statement for every N. Each page is all-or-nothing and a
rerun converges to the fault-free result; a cut that falls between two transactions, on a pooled connection, is
recovered by the pool without an error and loses nothing."""

from __future__ import annotations

import dataclasses
import datetime as dt

import psycopg2
import psycopg2.extensions
import pytest
import sqlalchemy as sa

import inference.pipeline.runtime
import inference.pipeline.steptimes
import inference.store.db
from inference.pipeline import infer_shard, load_results, plan_run
from inference.store.db import DatabaseUnavailable
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
RUN = "run-db"
N, PAGE = 30, 8  # 4 pages: 8 + 8 + 8 + 6
PAGES = -(-N // PAGE)
UPSERT = b"INSERT INTO ticket_results"
COMMIT = b"COMMIT\x00"
DB_ERRORS = (sa.exc.OperationalError, sa.exc.InterfaceError, psycopg2.OperationalError, DatabaseUnavailable)


@dataclasses.dataclass
class StagedRun:
    settings: object
    order: list[str]  # staged ticket IDs in load order
    restore: object  # puts the tables back as they were after infer, before load
    reference: dict  # the tables after a fault-free load


@pytest.fixture(autouse=True)
def no_step_rows(monkeypatch):
    """The step timing rows (inference_steps) are written best effort on connections of their own, before and
    after the step: they are not part of load's transactions, and a fault that hits them is swallowed by
    design. Off here, so every statement, message and byte these tests count or cut is load's own."""
    monkeypatch.setattr(inference.pipeline.steptimes.StepTimer, "_write", lambda self, action: None)


@pytest.fixture
def staged(pg_settings, add_tickets, model, view, snapshot) -> StagedRun:
    """30 tickets planned and inferred (staged), the fault-free load's outcome, and a way back to before it."""
    settings = pg_settings(chunk_size=PAGE)
    ids = add_tickets(N)
    for shard in plan_run(settings, RUN, WINDOW):
        infer_shard(settings, RUN, shard.shard, predictor=model)
    order = view.staging_order(RUN)
    assert sorted(order) == sorted(ids)
    before = snapshot()
    load_results(settings, RUN)
    reference = view.final_state(RUN)
    assert len(reference["results"]) == N and reference["staging"] == [] and reference["failures"] == []
    assert {status for status, _, _ in reference["items"].values()} == {"succeeded"}
    before.restore()
    return StagedRun(settings, order, before.restore, reference)


def via(proxy, settings):
    return dataclasses.replace(settings, db_url=proxy.url(settings.db_url))


def test_the_proxy_is_transparent(staged, pg_proxy, view):
    load_results(via(pg_proxy, staged.settings), RUN)
    assert pg_proxy.cuts == 0
    assert sum(q.startswith(UPSERT) for q in pg_proxy.queries) == PAGES
    assert sum(q == COMMIT for q in pg_proxy.queries) == PAGES  # one transaction per page
    assert view.final_state(RUN) == staged.reference


@pytest.mark.parametrize(
    ("where", "pages_committed"),
    [
        ("after page 2's upsert reached the server", 1),
        ("before page 3's upsert reached the server", 2),
        ("at 35% of the load's bytes", None),
        ("at 60% of the load's bytes", None),
        ("at 85% of the load's bytes", None),
    ],
)
def test_connection_cut_mid_load(staged, pg_proxy, view, query_rule, check_pages, where, pages_committed):
    through_proxy = via(pg_proxy, staged.settings)
    if "byte" in where:
        load_results(through_proxy, RUN)  # measure a fault-free load's client bytes
        total = pg_proxy.client_bytes
        staged.restore()
        share = int(where.split("%")[0].rsplit(" ", 1)[1]) / 100
        pg_proxy.reset(cut_at_byte=int(total * share))
    elif where.startswith("after"):
        pg_proxy.reset(rule=query_rule(UPSERT, 2, "cut_after"))
    else:
        pg_proxy.reset(rule=query_rule(UPSERT, 3, "cut_before"))

    try:
        load_results(through_proxy, RUN)
    except DB_ERRORS:
        assert pg_proxy.cuts == 1
        committed = check_pages(RUN, staged.order, PAGE)  # whole pages or nothing, states match the rows
        if pages_committed is not None:
            assert committed == pages_committed
        assert committed < PAGES, "the cut came before the load had finished"
        load_results(staged.settings, RUN)  # the retry, on a healthy connection
    else:
        # a byte position can fall between two transactions, on a connection back in the pool: its reset
        # (ROLLBACK) meets the dead line, the pool drops that connection and the load goes on over a new one
        assert pages_committed is None, "a cut inside a page's transaction must fail the load"
        assert pg_proxy.cuts == 1 and pg_proxy.queries.count(b"SELECT 1\x00") >= 1  # the pool's liveness check
    assert view.final_state(RUN) == staged.reference  # nothing lost, nothing twice, either way


def test_connection_cut_at_every_message_of_a_page_transaction(staged, pg_proxy, view, query_rule, check_pages):
    """Page 2's write transaction, message by message (BEGIN .. COMMIT): the line dies just before the
    message reaches the server, or just after the server answered it (the client never hears the answer)."""
    through_proxy = via(pg_proxy, staged.settings)
    load_results(through_proxy, RUN)  # the fault-free conversation, to aim at
    queries = list(pg_proxy.queries)
    upsert = [k for k, q in enumerate(queries) if q.startswith(UPSERT)][1]
    begin = max(k for k in range(upsert) if queries[k] == b"BEGIN\x00")
    end = min(k for k in range(upsert, len(queries)) if queries[k] == COMMIT)
    assert end - begin >= 3
    for k in range(begin, end + 1):
        for action in ("cut_before", "cut_after"):
            staged.restore()
            pg_proxy.reset(rule=query_rule(b"", k + 1, action))  # the (k+1)-th query, whatever it says
            with pytest.raises(DB_ERRORS):
                load_results(through_proxy, RUN)
            where = f"{action} {queries[k][:30]!r}"
            assert pg_proxy.cuts == 1, where
            committed = check_pages(RUN, staged.order, PAGE)
            assert committed == (2 if (k, action) == (end, "cut_after") else 1), where
            load_results(staged.settings, RUN)
            assert view.final_state(RUN) == staged.reference, where


@pytest.mark.parametrize("when", ["cut_before", "cut_after"])
def test_connection_lost_at_commit(staged, pg_proxy, view, query_rule, check_pages, when):
    """cut_before: COMMIT never reaches the server (page rolled back). cut_after: the server commits but the
    client never hears it, the ambiguous case: load raises although page 2 is in."""
    pg_proxy.reset(rule=query_rule(COMMIT, 2, when))

    with pytest.raises(DB_ERRORS):
        load_results(via(pg_proxy, staged.settings), RUN)

    assert pg_proxy.cuts == 1
    assert check_pages(RUN, staged.order, PAGE) == (1 if when == "cut_before" else 2)

    load_results(staged.settings, RUN)
    assert view.final_state(RUN) == staged.reference


class NthStatementFault:
    """Fails the Nth statement that engines made by `make_engine` send, on the real driver path.

    Statements SQLAlchemy executes are counted in its before_cursor_execute event and fail with
    sqlalchemy's OperationalError; bulk COPYs go through the raw psycopg2 cursor (no SQLAlchemy event),
    so the connections get a cursor class that counts those too and fails them as psycopg2 would.
    """

    def __init__(self):
        self.fail_at: int | None = None
        self.count = 0
        self.statements: list[str] = []
        self.real_make_engine = inference.store.db.make_engine

    def make_engine(self, url, **kwargs):
        engine = self.real_make_engine(url, **kwargs)
        sa.event.listen(engine, "before_cursor_execute", self._before_cursor_execute)
        sa.event.listen(engine, "connect", self._on_connect)
        return engine

    def _tick(self, statement: str) -> bool:
        self.count += 1
        self.statements.append(statement.split(None, 3)[0] if statement.strip() else "?")
        return self.count == self.fail_at

    def _before_cursor_execute(self, conn, cursor, statement, parameters, context, executemany):
        if self._tick(statement):
            raise sa.exc.OperationalError(
                statement, parameters, psycopg2.OperationalError("injected: server closed the connection")
            )

    def _on_connect(self, dbapi_connection, _record):
        fault = self

        class CountingCursor(psycopg2.extensions.cursor):
            def copy_expert(self, sql, file, size=8192):
                if fault._tick(sql):
                    raise psycopg2.OperationalError("injected: server closed the connection")
                return super().copy_expert(sql, file, size)

        dbapi_connection.cursor_factory = CountingCursor

    def arm(self, fail_at: int | None) -> None:
        self.fail_at, self.count, self.statements = fail_at, 0, []


def test_error_on_the_nth_statement_of_load_for_every_n(staged, monkeypatch, view, check_pages):
    fault = NthStatementFault()
    monkeypatch.setattr(inference.store.db, "make_engine", fault.make_engine)
    monkeypatch.setattr(inference.pipeline.runtime, "make_engine", fault.make_engine)  # what Runtime calls

    fault.arm(None)
    load_results(staged.settings, RUN)
    total = fault.count
    assert view.final_state(RUN) == staged.reference
    assert total > 5 * PAGES  # every page reads, upserts, settles item states and unstages
    if "COPY" in fault.statements:  # the bulk path (COPY into a temporary twin, then merge)
        assert fault.statements.count("COPY") == PAGES

    committed = {}
    for n in range(1, total + 1):
        staged.restore()
        fault.arm(n)
        with pytest.raises(DB_ERRORS):
            load_results(staged.settings, RUN)
        committed[n] = check_pages(RUN, staged.order, PAGE)
        fault.arm(None)
        load_results(staged.settings, RUN)
        assert view.final_state(RUN) == staged.reference, f"no convergence after a fault on statement {n}"
    # the faults landed before, inside and after every page's transaction
    assert set(committed.values()) == set(range(PAGES + 1))
