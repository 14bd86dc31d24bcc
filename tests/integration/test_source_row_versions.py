"""Row versions (inference/store/source.py, "Row versions"): on a PostgreSQL table the check before writing
trusts what the model read only while the ticket's rows are the very same row versions; every change of them
(an edit, an update to the same text, a delete, a duplicate row added, a row moved to another partition) makes
it read the text again. Views, SQLite and roles that may not read the system columns always read again.

Each check hands `versions` a marker hash as "what was read": the marker coming back proves the text was not
read again; the real hash coming back proves it was."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from inference.config import SourceColumns
from inference.records import SourceVersion
from inference.store import bulk
from inference.store.db import make_engine, writing
from inference.store.schema import create_schema, tickets
from inference.store.source import Source
from inference.window import window_for_date
from tests.support import sources as s
from tests.support.sources import Shapes, ticket

W = window_for_date(dt.date(2026, 11, 30))
AT = W.start + dt.timedelta(hours=3)
MARKER = "f" * 64  # no text hashes to this


@pytest.fixture
def shapes(db_engine):
    made = Shapes(db_engine)
    yield made
    made.close()


def as_text(subject, body):
    return f"{subject}\n{body}", False


def read(source: Source, keys: list[str]) -> dict:
    """What the model reads of these keys, with the marker as each one's hash."""
    with source.engine.connect() as conn:
        inputs = source.model_inputs(conn, keys, as_text)
    return {k: (t.row_version, SourceVersion(MARKER, t.version_at)) for k, t in inputs.items() if t.row_version}


def now(source: Source, keys: list[str], as_read: dict) -> dict[str, str]:
    with source.engine.connect() as conn:
        return {k: v.content_hash for k, v in source.versions(conn, keys, as_read).items()}


def test_only_postgresql_tables_have_row_versions(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", [ticket(1, "Refund", "charged twice", AT)])
    shapes.view("src_view", "SELECT * FROM src")
    table = Source(db_engine, SourceColumns(table="src"))
    view = Source(db_engine, SourceColumns(table="src_view"))

    assert table.row_versions is shapes.pg
    assert view.row_versions is False
    assert (len(read(table, ["1"])), read(view, ["1"])) == (1 if shapes.pg else 0, {})
    with db_engine.connect() as conn:  # no row versions: always read again, whatever the caller hands in
        fake = {"1": ("1:(0,1):1", SourceVersion(MARKER, AT))}
        assert view.versions(conn, ["1"], fake)["1"].content_hash == s.digest("Refund", "charged twice")


def test_a_ticket_is_read_again_whenever_its_rows_changed(pg_engine):
    shapes = Shapes(pg_engine)
    try:
        shapes.tickets_table()  # no primary key: an import may add a second row of a key
        shapes.insert("src", [ticket(k, "Subject", f"body of {k}", AT) for k in range(1, 7)])
        source = Source(pg_engine, SourceColumns(table="src"))
        keys = [str(k) for k in range(1, 7)]
        as_read = read(source, keys)
        assert sorted(as_read) == keys
        assert now(source, keys, as_read) == dict.fromkeys(keys, MARKER)  # nothing changed: no text read

        shapes.sql(
            "UPDATE src SET body = body WHERE ticket_id = 1",  # the same text: a new row version all the same
            "UPDATE src SET body = 'edited' WHERE ticket_id = 2",
            "DELETE FROM src WHERE ticket_id = 3",
        )
        shapes.insert("src", [ticket(4, "Subject", "an older duplicate of 4", AT - dt.timedelta(hours=1))])
        shapes.insert("src", [ticket(5, "Subject", "a newer duplicate of 5", AT + dt.timedelta(hours=1))])

        assert now(source, keys, as_read) == {
            "1": s.digest("Subject", "body of 1"),
            "2": s.digest("Subject", "edited"),
            "4": s.digest("Subject", "body of 4"),  # read again; the newest row still wins
            "5": s.digest("Subject", "a newer duplicate of 5"),
            "6": MARKER,
        }
        assert now(source, ["6", "2"], {}) == {
            "6": s.digest("Subject", "body of 6"),
            "2": s.digest("Subject", "edited"),
        }
    finally:
        shapes.close()


def test_partitioned_tables_have_row_versions_and_a_moved_row_is_read_again(pg_engine):
    shapes = Shapes(pg_engine)
    try:
        shapes.table(
            "src",
            "ticket_id BIGINT, subject TEXT, body TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ"
            ") PARTITION BY RANGE (created_at",
        )
        day = AT.replace(hour=0, minute=0, second=0)
        shapes.sql(
            f"CREATE TABLE src_a PARTITION OF src FOR VALUES FROM ('{day - dt.timedelta(days=30)}') TO ('{day}')",
            f"CREATE TABLE src_b PARTITION OF src FOR VALUES FROM ('{day}') TO ('{day + dt.timedelta(days=30)}')",
        )
        shapes.insert("src", [ticket(k, "Subject", f"body of {k}", AT) for k in (1, 2)])
        source = Source(pg_engine, SourceColumns(table="src"))
        assert source.row_versions
        as_read = read(source, ["1", "2"])
        assert now(source, ["1", "2"], as_read) == {"1": MARKER, "2": MARKER}

        shapes.sql(f"UPDATE src SET created_at = '{AT - dt.timedelta(days=2)}' WHERE ticket_id = 1")  # to src_a

        assert now(source, ["1", "2"], as_read) == {"1": s.digest("Subject", "body of 1"), "2": MARKER}
    finally:
        shapes.close()


def test_a_bare_postgresql_url_writes_in_bulk(pg_engine):
    """postgresql:// (no driver named) writes through COPY as postgresql+psycopg2:// does."""
    engine = make_engine(pg_engine.url.set(drivername="postgresql").render_as_string(hide_password=False))
    try:
        create_schema(engine, with_demo_source=True)
        with writing(engine) as conn:
            bulk.copy_rows(conn, tickets, [ticket(1, "Refund", "charged twice", AT)])
        with engine.connect() as conn:
            assert conn.scalar(sa.select(tickets.c.body).where(tickets.c.ticket_id == 1)) == "charged twice"
    finally:
        engine.dispose()


def test_id_lists_longer_than_a_page_are_worked_in_pages(db_engine):
    """Statements on lists of IDs go a page at a time (10,000 on PostgreSQL, one array parameter; 1,000
    elsewhere): every ID of a list two pages and a bit long is found, locked and settled, none twice."""
    from inference.store import items
    from inference.store.db import page_size
    from inference.store.schema import ITEM_PLANNED, ITEM_SUCCEEDED, inference_run_items

    create_schema(db_engine, with_demo_source=True)
    n = 2 * page_size(db_engine.dialect.name) + 3
    ids = [f"{k:06d}" for k in range(n)]
    row = dict(run_id="pages", shard=0, est_tokens=1, content_hash="a" * 64, status=ITEM_PLANNED, attempts=0)
    with writing(db_engine) as conn:
        conn.execute(sa.delete(inference_run_items).where(inference_run_items.c.run_id == "pages"))
        conn.execute(sa.insert(inference_run_items), [dict(row, ticket_id=t) for t in ids])
    asked = ids[::-1] + ["missing-1", "missing-2"] + ids[:5]  # unsorted, unknown IDs and repeats
    with writing(db_engine) as conn:
        assert items.lock_open_items(conn, "pages", asked) == set(ids)
        items.set_items(conn, "pages", asked, ITEM_SUCCEEDED, None)
        assert items.item_ids(conn, "pages", asked) == set(ids)
        assert items.item_counts(conn, "pages") == {ITEM_SUCCEEDED: n}
        conn.execute(sa.delete(inference_run_items).where(inference_run_items.c.run_id == "pages"))
