"""Lookups by key on PostgreSQL. The retraction sweep (inference/store/retraction.py) on PostgreSQL: the anti-join by the source's key index
retracts exactly the results whose ticket no source row holds any more, the same as looking the IDs up key by
key from Python, whatever the stored IDs are: non-canonical forms of a key ('007' for 7), texts the key's type
cannot hold ('abc' for an integer key: that page falls back to key-by-key lookups), pages of any size."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.config import SourceColumns
from inference.store import retraction
from inference.store.db import writing
from inference.store.schema import create_schema, ticket_results
from inference.store.source import Source
from tests.support.sources import Shapes
from tests.support.tables import result_row

KEY_TYPES = {"BIGINT": st.integers(-3, 40).map(str), "TEXT": st.text("aB7-", min_size=1, max_size=3)}
ODD_IDS = st.sampled_from(["007", "+7", " 7", "abc", "7.0", "1e1", "-0"])  # none a bigint's canonical text


@pytest.fixture
def shapes(pg_engine):
    create_schema(pg_engine)
    made = Shapes(pg_engine)
    yield made
    made.close()


def _store(engine: sa.Engine, source_ids: set[str], result_ids: set[str], key_type: str) -> None:
    with writing(engine) as conn:
        conn.exec_driver_sql("DELETE FROM src")
        conn.execute(sa.delete(ticket_results))
        for k in source_ids:
            conn.execute(
                sa.text(
                    f"INSERT INTO src (ticket_id, created_at, updated_at) VALUES (CAST(:k AS {key_type}), now(), now())"
                ),
                {"k": k},
            )
        if result_ids:
            conn.execute(sa.insert(ticket_results), [result_row(t) for t in result_ids])


def _kept(engine: sa.Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.scalars(sa.select(ticket_results.c.ticket_id)))


@pytest.mark.parametrize("key_type", sorted(KEY_TYPES))
def test_the_sweep_retracts_exactly_the_results_no_source_row_holds(shapes, key_type):
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        source_ids=st.sets(KEY_TYPES[key_type], max_size=12),
        stored=st.sets(KEY_TYPES[key_type] | ODD_IDS, max_size=14),
        page=st.integers(1, 6),
    )
    def check(source_ids, stored, page):
        source = Source(shapes.engine, SourceColumns(table="src"))
        assert source.holds_key(ticket_results.c.ticket_id) is not None  # the anti-join runs
        expected = {t for t in stored if t in source_ids}  # the source's keys are its IDs' canonical texts
        _store(shapes.engine, source_ids, stored, key_type)
        retracted = retraction.sweep_deleted(shapes.engine, source, page)
        assert (_kept(shapes.engine), retracted) == (expected, len(stored) - len(expected))

        _store(shapes.engine, source_ids, stored, key_type)  # the same, looked up key by key from Python
        by_key = Source(shapes.engine, SourceColumns(table="src"))
        by_key.holds_key = lambda _key: None
        assert retraction.sweep_deleted(shapes.engine, by_key, page) == len(stored) - len(expected)
        assert _kept(shapes.engine) == expected

    shapes.tickets_table("src", id_type=key_type, ts="TIMESTAMPTZ")
    check()


@pytest.mark.parametrize("key_type", ["SMALLINT", "INTEGER", "BIGINT", "TEXT", "VARCHAR(20)", "UUID"])
def test_keys_looked_up_without_a_savepoint_surely_cast(shapes, key_type):
    """A page of keys is looked up without a savepoint only where every key surely casts to the key column's
    type (Source._surely_cast); the source's own keys of integer and text columns always qualify."""
    shapes.tickets_table("src", id_type=key_type, ts="TIMESTAMPTZ")
    source = Source(shapes.engine, SourceColumns(table="src"))
    sql_type = "VARCHAR" if key_type.startswith("VARCHAR") else key_type
    bounds = {"SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}.get(key_type, 2**63)
    edges = st.sampled_from([bounds - 1, bounds, -bounds, -bounds - 1, 0]).map(str)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(key=st.text("0123456789-+ e.x", min_size=1, max_size=22) | st.integers(-(2**64), 2**64).map(str) | edges)
    def check(key):
        if not source._surely_cast([key]):  # noqa: SLF001 - the rule under test
            return
        with shapes.engine.connect() as conn:
            conn.execute(sa.text(f"SELECT CAST(:k AS {sql_type})"), {"k": key})  # raises if the cast fails

    check()
    canonical = {"UUID": "0c3e8a4e-9a4b-4d1e-8a61-9b8d6b1c2f10"}.get(key_type, str(bounds - 1))
    assert source._surely_cast([canonical]) == (key_type != "UUID")  # noqa: SLF001
