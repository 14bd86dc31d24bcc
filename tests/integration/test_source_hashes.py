"""Hashes in the database (inference/store/source.py): on PostgreSQL plan has the database hash each row, and
what it reads must be exactly what hashing the text in Python gives (`content_hash`, `has_text`, the length),
or infer would take every ticket for edited. Real tables on the real server, any text PostgreSQL can hold."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.config import SourceColumns
from inference.store.source import Source
from inference.textprep import HASH_PIECE, content_hash, has_text
from inference.window import window_for_date
from tests.support.sources import Shapes, ticket

W = window_for_date(dt.date(2026, 11, 30))
AT = W.start + dt.timedelta(hours=3)

# PostgreSQL text holds neither NUL nor lone surrogates; everything else may come.
pg_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))
SHAPES = [
    (None, None),
    ("", ""),
    ("   ", "\t\n"),
    ("Refund", "charged twice"),
    ('q"uote\\', "tab\tnl\ncr\rbell\x07del\x7f\x1f\x08\x0c"),
    ("\u2028\u2029", "\u00e9\u6f22\u5b57 \U0001f600"),  # no ASCII letter: the text comes to Python
    ("\u200b\ufeff", "\u00ad\u2060"),  # only invisible characters: empty
    ("\u0645\u0631\u062d\u0628\u0627", None),  # Arabic, nothing ASCII: visible, decided in Python
    (None, "x" * (3 * HASH_PIECE) + '"\\\x01'),
    ("\x1b", None),  # a control character only: empty
]


@pytest.fixture
def shapes(pg_engine):
    made = Shapes(pg_engine)
    yield made
    made.close()


def expected(subject, body) -> tuple[str, bool, int]:
    return content_hash(subject, body), not has_text(subject, body), len(subject or "") + len(body or "")


def planned(source: Source, keys: list[str]) -> tuple[dict, dict]:
    """What plan reads, by the window and by key: key -> (hash, empty, characters)."""
    with source.engine.connect() as conn:
        by_window = {r.ticket_id: (r.content_hash, r.empty, r.chars) for r in source.scan_window(conn, W)}
        by_key = {r.ticket_id: (r.content_hash, r.empty, r.chars) for r in source.scan_ids(conn, keys)}
    return by_window, by_key


def fill(shapes: Shapes, table: str, rows: list[tuple]) -> None:
    with shapes.engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {table}")
    shapes.insert(table, [ticket(k + 1, subject, body, AT) for k, (subject, body) in enumerate(rows)])


def check(source: Source, rows: list[tuple]) -> None:
    keys = [str(k + 1) for k in range(len(rows))]
    want = {key: expected(subject, body) for key, (subject, body) in zip(keys, rows, strict=True)}
    by_window, by_key = planned(source, keys)
    assert by_window == want
    assert by_key == want


@pytest.mark.parametrize("text_type", ["TEXT", "VARCHAR(400000)"])
def test_the_database_hashes_every_shape_as_python_does(shapes, text_type):
    shapes.table(
        "src",
        f"ticket_id BIGINT, subject {text_type}, body {text_type}, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ",
    )
    source = Source(shapes.engine, SourceColumns(table="src"))
    assert source.hashes_in_db
    fill(shapes, "src", SHAPES)
    check(source, SHAPES)


def test_domains_over_text_hash_in_the_database(shapes):
    shapes.sql("DROP DOMAIN IF EXISTS ticket_text", "CREATE DOMAIN ticket_text AS text")
    shapes.table(
        "src", "ticket_id BIGINT, subject ticket_text, body ticket_text, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ"
    )
    source = Source(shapes.engine, SourceColumns(table="src"))
    assert source.hashes_in_db
    fill(shapes, "src", SHAPES)
    check(source, SHAPES)
    shapes.drop("src")
    shapes.sql("DROP DOMAIN ticket_text")


def test_padded_char_columns_hash_in_python(shapes):
    """char(n): JSON keeps the padding that length() drops, so Python hashes what the driver returns."""
    shapes.table(
        "src", "ticket_id BIGINT, subject CHAR(12), body CHAR(40), created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ"
    )
    source = Source(shapes.engine, SourceColumns(table="src"))
    assert not source.hashes_in_db
    rows = [("Refund", "charged twice"), (None, "   "), ("\u00e9", None)]
    fill(shapes, "src", rows)
    with shapes.engine.connect() as conn:  # what the driver returns: padded
        read = conn.execute(sa.text("SELECT subject, body FROM src ORDER BY ticket_id")).all()
    check(source, [tuple(r) for r in read])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.none() | pg_text, st.none() | pg_text), min_size=1, max_size=12))
def test_any_text_postgresql_holds_hashes_the_same_in_the_database(shapes, rows):
    if not shapes.made:
        shapes.tickets_table("src", id_type="BIGINT", ts="TIMESTAMPTZ")
    source = Source(shapes.engine, SourceColumns(table="src"))
    assert source.hashes_in_db
    fill(shapes, "src", rows)
    check(source, rows)


# --- the window planned inside the database --------------------------------------------------------------------

US = dt.timedelta(microseconds=1)
INSTANTS = [
    None,
    W.start - US,
    W.start,
    W.start + dt.timedelta(hours=5, microseconds=123457),
    W.end - US,
    W.end,
    W.start - dt.timedelta(days=400, microseconds=999999),
    dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=dt.UTC),  # before the epoch
    "infinity",
    "-infinity",
]
source_ids = st.none() | st.text("ab1-", max_size=3) | st.just("x" * 600)  # NULL, duplicates, too long
source_texts = st.sampled_from([None, "", " ", "Refund", "\u00e9\u00e9", "\u200b", "\u6f22 1"])


def raw_rows(source: Source, in_db: bool) -> list[tuple]:
    """plan's table of source rows, filled by the database and Python (`in_db`) or by Python alone."""
    from inference.store import planning

    with source.engine.begin() as conn:
        if in_db:
            n = planning.open_tables(conn, source.window_plan_rows(W))
            with source.engine.connect() as read:
                n += planning.add_source_pages(
                    conn, planning.source_pages(source.scan_window(read, W, rest=True), "postgresql")
                )
        else:
            planning.open_tables(conn)
            with source.engine.connect() as read:
                n = planning.add_source_pages(conn, planning.source_pages(source.scan_window(read, W), "postgresql"))
        found = sorted(tuple(r) for r in conn.execute(sa.select(planning.raw)))
        assert n == len(found)
        conn.rollback()
    return found


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(source_ids, source_texts, source_texts, st.sampled_from(INSTANTS), st.sampled_from(INSTANTS)),
        max_size=25,
    )
)
def test_the_window_planned_in_the_database_equals_reading_it_in_python(shapes, rows):
    if not shapes.made:
        shapes.table("src", "ticket_id TEXT, subject TEXT, body TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ")
    with shapes.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM src")
    shapes.insert("src", [dict(ticket_id=i, subject=s, body=b, created_at=c, updated_at=u) for i, s, b, c, u in rows])
    in_db = Source(shapes.engine, SourceColumns(table="src"))
    assert in_db.plans_in_db
    in_python = Source(shapes.engine, SourceColumns(table="src"))
    in_python.hashes_in_db = False
    assert not in_python.plans_in_db
    assert raw_rows(in_db, True) == raw_rows(in_python, False)


def test_text_timestamps_and_char_columns_are_not_planned_in_the_database(shapes):
    shapes.table("t1", "ticket_id BIGINT, subject TEXT, body TEXT, created_at TEXT, updated_at TIMESTAMPTZ")
    shapes.table("t2", "ticket_id BIGINT, subject CHAR(9), body TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ")
    shapes.table("t3", "ticket_id BIGINT, subject TEXT, body TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMP")
    assert not any(Source(shapes.engine, SourceColumns(table=t)).plans_in_db for t in ("t1", "t2", "t3"))
    assert Source(shapes.engine, SourceColumns(table="t1")).hashes_in_db
