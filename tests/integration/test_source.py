"""Reading a source table with its own name, column names and key type, on both dialects."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from inference.config import ConfigError, SourceColumns
from inference.store.db import UTCDateTime, writing
from inference.store.source import Source
from inference.window import window_for_date

DAY = dt.date(2026, 11, 30)
W = window_for_date(DAY)


def make_requests_table(engine, key_type) -> sa.Table:
    md = sa.MetaData()
    table = sa.Table(
        "support_requests",
        md,
        sa.Column("req_key", key_type, primary_key=True),
        sa.Column("title", sa.Text),
        sa.Column("description", sa.Text),
        sa.Column("opened", UTCDateTime),
        sa.Column("modified", UTCDateTime, nullable=True),
    )
    md.drop_all(engine)
    md.create_all(engine)
    return table


COLS = SourceColumns(
    table="support_requests",
    ticket_id="req_key",
    subject="title",
    body="description",
    created_at="opened",
    updated_at="modified",
)


@pytest.mark.parametrize(
    "key_type,keys", [(sa.Integer, [10, 11, 12, 13, 14]), (sa.String(40), ["a-1", "b-2", "c-3", "d-4", "e-5"])]
)
def test_window_selection_and_lookup_with_custom_names(db_engine, key_type, keys):
    table = make_requests_table(db_engine, key_type)
    inside = W.start + dt.timedelta(hours=1)
    rows = [
        dict(req_key=keys[0], title="created inside", description="x", opened=inside, modified=inside),
        dict(
            req_key=keys[1],
            title="created before, updated inside",
            description="x",
            opened=W.start - dt.timedelta(days=3),
            modified=inside,
        ),
        dict(
            req_key=keys[2],
            title="both before",
            description="x",
            opened=W.start - dt.timedelta(days=3),
            modified=W.start - dt.timedelta(days=2),
        ),
        dict(req_key=keys[3], title="at the end bound", description="x", opened=W.end, modified=W.end),
        dict(req_key=keys[4], title="never updated", description="x", opened=W.start, modified=None),
    ]
    with writing(db_engine) as conn:
        conn.execute(sa.insert(table), rows)

    source = Source(db_engine, COLS)
    with db_engine.connect() as conn:
        found = {t.ticket_id: t for t in source.in_window(conn, W)}
        assert set(found) == {str(keys[0]), str(keys[1]), str(keys[4])}
        assert found[str(keys[4])].version_at == W.start  # NULL updated_at falls back to created_at
        looked_up = source.by_ids(conn, [str(k) for k in keys] + ["999"])
    assert set(looked_up) == {str(k) for k in keys}
    assert looked_up[str(keys[1])].subject == "created before, updated inside"


def test_missing_table_or_column_is_a_clear_config_error(db_engine):
    with pytest.raises(ConfigError, match="does not exist"):
        Source(db_engine, SourceColumns(table="no_such_table"))
    make_requests_table(db_engine, sa.Integer)
    with pytest.raises(ConfigError, match="no column.*description_text"):
        Source(
            db_engine,
            SourceColumns(
                table="support_requests",
                ticket_id="req_key",
                subject="title",
                body="description_text",
                created_at="opened",
                updated_at="modified",
            ),
        )
