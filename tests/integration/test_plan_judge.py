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
from inference.store.schema import FAILURE_DEAD, FAILURE_PENDING, inference_run_items, ticket_failures, ticket_results
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


candidate = st.tuples(
    st.text("aB1-é", min_size=1, max_size=4),  # IDs whose order the database decides (its collation)
    st.integers(1, 300),  # estimated tokens
    st.booleans(),  # empty
    st.booleans(),  # unsupported ID
)


def expected_shards(order: list[str], cands: dict[str, tuple[int, bool, bool]], shards: int) -> dict:
    """The docstring of planning.write_items, step by step: work tickets in ID order, each in the shard its
    tokens' midpoint falls in, those shards numbered densely; empty and unsupported tickets in none (-1)."""
    total = max(sum(est for est, empty, bad in cands.values() if not (empty or bad)), 1)
    upto, dense, last, out = 0, -1, None, {}
    for t in order:
        est, empty, bad = cands[t]
        if bad:
            out[t] = (-1, "failed", "unsupported_id")
        elif empty:
            out[t] = (-1, "skipped", "empty_input")
        else:
            upto += est
            raw_shard = ((2 * upto - est) * shards) // (2 * total)
            if raw_shard != last:
                dense, last = dense + 1, raw_shard
            out[t] = (dense, "planned", None)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cands=st.lists(candidate, max_size=25, unique_by=lambda c: c[0]), shards=st.integers(1, 7))
def test_items_are_written_in_contiguous_balanced_densely_numbered_shards(schema_engine, cands, shards):
    """write_items' shard of every ticket (one pass of windows over ID order) equals the step-by-step
    definition; each shard is a contiguous range of IDs and shards are numbered 0, 1, .. without gaps."""
    by_id = {t: (est, empty, bad) for t, est, empty, bad in cands}
    with writing(schema_engine) as conn:
        planning.open_tables(conn)
        planning._write(
            conn,
            planning.candidates,
            [(t, HASHES[0], est, empty, False, "null" if bad else None, 0) for t, est, empty, bad in cands],
        )
        work_tokens = planning.counts(conn, None).work_tokens
        planning.write_items(conn, "run-s", None, shards, work_tokens)
        i = inference_run_items.c
        got = {
            r.ticket_id: (r.shard, r.status, r.reason)
            for r in conn.execute(sa.select(i.ticket_id, i.shard, i.status, i.reason).where(i.run_id == "run-s"))
        }
        order = list(conn.scalars(sa.select(planning.candidates.c.ticket_id).order_by(planning.candidates.c.ticket_id)))
        conn.rollback()
    assert got == expected_shards(order, by_id, shards)
    numbers = [got[t][0] for t in order if got[t][0] >= 0]
    assert numbers == sorted(numbers)  # contiguous ranges in ID order
    assert sorted(set(numbers)) == list(range(len(set(numbers))))  # dense
    assert len(set(numbers)) <= shards
