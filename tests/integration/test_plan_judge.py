"""Plan judges which tickets need work in SQL (planning.add_candidates); inference.plan.needs_work is the
definition. On both dialects, for random plan rows, stored results and dead letters (hashes and model versions
drawn from tiny sets so that matches and mismatches are both common), the candidates are exactly the rows
needs_work accepts, with the token estimate of textprep.tokens_for_chars and the result flag."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.plan import needs_work
from inference.store import planning
from inference.store.db import writing
from inference.store.schema import FAILURE_DEAD, FAILURE_PENDING, ticket_failures, ticket_results
from inference.textprep import tokens_for_chars
from tests.support.tables import result_row

HASHES = ("a" * 64, "b" * 64, "c" * 64)
VERSIONS = ("v1", "v2")
MAX_LEN = 64
AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)

ids = st.sampled_from([str(k) for k in range(12)] + ["!unsupported-id:null:1"])
source_row = st.tuples(ids, st.sampled_from(HASHES), st.booleans(), st.integers(0, 400))
result = st.tuples(ids, st.sampled_from(HASHES), st.sampled_from(VERSIONS))
failure = st.tuples(ids, st.sampled_from(HASHES), st.sampled_from(VERSIONS), st.booleans())


def failure_row(k: int, ticket_id: str, digest: str, version: str, dead: bool) -> dict:
    return dict(
        run_id=f"earlier-{k}",
        ticket_id=ticket_id,
        attempt=1,
        content_hash=digest,
        model_version=version,
        error_class="model_error",
        retryable=not dead,
        status=FAILURE_DEAD if dead else FAILURE_PENDING,
        message="",
        created_at=AT,
        updated_at=AT,
    )


@pytest.fixture
def schema_engine(db_engine):
    from inference.store.schema import create_schema

    create_schema(db_engine)
    return db_engine


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    source=st.lists(source_row, max_size=10, unique_by=lambda r: r[0]),
    stored=st.lists(result, max_size=8, unique_by=lambda r: r[0]),
    failed=st.lists(failure, max_size=6),
    version=st.sampled_from(VERSIONS),
    force=st.booleans(),
)
def test_sql_judgement_equals_needs_work(schema_engine, source, stored, failed, version, force):
    engine = schema_engine
    with writing(engine) as conn:
        conn.execute(sa.delete(ticket_results))
        conn.execute(sa.delete(ticket_failures))
        if stored:
            conn.execute(sa.insert(ticket_results), [result_row(t, digest=d, version=v) for t, d, v in stored])
        if failed:
            conn.execute(sa.insert(ticket_failures), [failure_row(k, *f) for k, f in enumerate(failed)])
        planning.open_tables(conn)
        planning._write(
            conn,
            planning.rows,
            [(t, "null" if t.startswith("!") else None, digest, empty, chars) for t, digest, empty, chars in source],
        )
        planning.add_candidates(conn, version, force, MAX_LEN)
        got = {
            r.ticket_id: (r.content_hash, r.est_tokens, r.empty, r.has_result, r.id_problem, r.pos)
            for r in conn.execute(sa.select(planning.candidates))
        }
        conn.rollback()

    results = {t: (digest, v) for t, digest, v in stored}
    dead: dict[str, set[str]] = {}
    for t, digest, v, is_dead in failed:
        if is_dead and v == version:
            dead.setdefault(t, set()).add(digest)
    expected = {}
    for t, digest, empty, chars in source:
        problem = "null" if t.startswith("!") else None
        found = results.get(t) if problem is None else None
        if needs_work(digest, found, version, dead.get(t), force):
            expected[t] = (digest, tokens_for_chars(chars, MAX_LEN), empty, found is not None, problem, 0)
    assert got == expected


def test_limit_positions_order_the_candidates(schema_engine):
    """`limit`: each candidate carries its position in the source's own order; unknown IDs go last."""
    with writing(schema_engine) as conn:
        conn.execute(sa.delete(ticket_results))
        planning.open_tables(conn)
        planning._write(conn, planning.rows, [(t, None, HASHES[0], False, 10) for t in ("10", "2", "7")])
        planning.add_candidates(conn, "v1", False, MAX_LEN, position={"2": 0, "10": 1})
        got = dict(conn.execute(sa.select(planning.candidates.c.ticket_id, planning.candidates.c.pos)).all())
        conn.rollback()
    assert got == {"2": 0, "10": 1, "7": 2}
