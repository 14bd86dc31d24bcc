"""Source tables shaped like real help-desk databases (issue 12), each built for real on SQLite and on
PostgreSQL, run through the whole pipeline (stand-in encoder): nothing lost, nothing duplicated, the right
final state; a shape that cannot be supported is refused at start, naming the column and the fix, before
anything is written.

Cases: duplicate IDs (a view over a join, an import), IDs of other shapes (untyped SQLite columns, `id + 0`
views, mixed types, long IDs, NULL IDs, non-integers in an INTEGER column, `limit` order), a table without a
subject column, mixed-case names as ORMs create them, timestamps (text with
offsets, naive in a zone, Unix times in any unit, a non-UTC database, DST), `updated_at` going backwards, two
model versions, deleted tickets, invisible-only text, scrambled engine outputs and staged rows without a run
item. Memory with big tickets is in test_source_memory.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import email.utils
import re
import threading
import zoneinfo

import pytest
import sqlalchemy as sa

from inference.config import quoted_name
from inference.engine.standin import StandInEncoder
from inference.errors import ConfigError, OutputsScrambled
from inference.options import RunOptions, parse_options
from inference.pipeline import finish_run, infer_shard, load_results, plan_run
from inference.records import StagedResult
from inference.store import staging
from inference.store.db import writing
from inference.store.schema import inference_staging
from inference.window import window_for_date
from tests.support import sources as s
from tests.support.sources import Shapes, ticket

DAY = dt.date(2026, 11, 30)
W = window_for_date(DAY)
W_BEFORE, W_AFTER = window_for_date(DAY - dt.timedelta(days=1)), window_for_date(DAY + dt.timedelta(days=1))
AT = W.start + dt.timedelta(hours=3)
TEXTS = [
    ("Charged twice", "I was billed twice for my plan this month."),
    ("Cannot log in", "The password reset email never arrives."),
    ("App crashes", "The desktop client crashes on startup."),
    ("Dark mode please", "It would be great to have a dark mode."),
    ("Where is my parcel", "My order has not arrived yet."),
    ("Cancel my plan", "Please cancel my subscription."),
]


@pytest.fixture
def shapes(db_engine):
    made = Shapes(db_engine)
    yield made
    made.close()


def text(k: int) -> tuple[str, str]:
    subject, body = TEXTS[k % len(TEXTS)]
    return subject, f"{body} Reference {k}."


def rows(ids, at=AT) -> list[dict]:
    return [ticket(i, *text(n), at) for n, i in enumerate(ids)]


def final_states(engine, run_id) -> dict[str, int]:
    out: dict[str, int] = {}
    for status, _reason in s.items(engine, run_id).values():
        out[status] = out.get(status, 0) + 1
    return out


def report_text(engine, run_id: str) -> str:
    from inference.report.compute import build
    from inference.report.formats import render

    return render(build(engine, run_id), "text")


# --- duplicate IDs ---------------------------------------------------------------------------------------------


def test_a_view_over_a_join_with_duplicate_ids_is_planned_once_per_ticket(db_engine, shapes):
    ts = shapes.ts()
    shapes.table("base", f"id BIGINT PRIMARY KEY, subject TEXT, body TEXT, created_at {ts}, updated_at {ts}")
    shapes.table("tags", "ticket BIGINT, tag TEXT")
    shapes.insert(
        "base", [dict(id=k, subject=text(k)[0], body=text(k)[1], created_at=AT, updated_at=AT) for k in (1, 2, 3, 4)]
    )
    shapes.insert(
        "tags", [dict(ticket=t, tag=g) for t, g in [(1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "b"), (3, "a")]]
    )
    shapes.view(
        "src",
        "SELECT b.id AS ticket_id, b.subject, b.body, b.created_at, b.updated_at FROM base b JOIN tags t ON t.ticket = b.id",
    )
    settings = s.settings(db_engine)

    summary = s.run(settings, "run-1", W)

    assert (summary["status"], summary["backlog"], summary["succeeded"]) == ("succeeded", 3, 3)
    assert summary["source_duplicates"] == 3  # 6 rows for 3 tickets
    assert sorted(s.results(db_engine)) == ["1", "2", "3"]
    assert re.search(r"duplicate source rows dropped \(newest kept\) +3\n", report_text(db_engine, "run-1"))
    again = s.run(settings, "run-2", W)  # every rerun of the window goes through, and finds nothing to do
    assert (again["status"], again["backlog"], again["source_duplicates"]) == ("succeeded", 0, 3)
    named = s.run(settings, "run-3", W, RunOptions(ticket_ids=("1", "2")))
    assert (named["status"], named["succeeded"]) == ("succeeded", 2)


def test_duplicate_rows_of_an_import_keep_the_newest_version_ties_broken_by_hash(db_engine, shapes):
    shapes.tickets_table()  # no primary key: an import may repeat an ID
    later = AT + dt.timedelta(hours=1)
    shapes.insert(
        "src",
        [
            ticket(5, "Refund", "old text of five", AT),
            ticket(5, "Refund", "new text of five", later),
            ticket(6, "Login", "one text of six", AT),
            ticket(6, "Login", "another text of six", AT),  # same version: the higher content hash wins
            ticket(7, "Parcel", "only row of seven", AT),
        ],
    )
    settings = s.settings(db_engine)

    summary = s.run(settings, "run-1", W)

    assert (summary["status"], summary["succeeded"], summary["source_duplicates"]) == ("succeeded", 3, 2)
    stored = s.results(db_engine)
    assert stored["5"].content_hash == s.digest("Refund", "new text of five")
    assert stored["5"].source_updated_at == later
    tie = max(s.digest("Login", "one text of six"), s.digest("Login", "another text of six"))
    assert stored["6"].content_hash == tie
    assert len(stored) == 3
    assert s.run(settings, "run-2", W)["backlog"] == 0  # load agreed with plan on the winner: converged


# --- IDs of other shapes ---------------------------------------------------------------------------------------


def test_untyped_columns_and_id_plus_zero_views_find_their_integer_ids(db_engine, shapes):
    ts = shapes.ts()
    untyped = "ticket_id" if not shapes.pg else "ticket_id BIGINT"  # SQLite: no declared type at all
    shapes.table("raw", f"{untyped}, subject TEXT, body TEXT, created_at {ts}, updated_at {ts}")
    shapes.insert("raw", rows([1, 2, 10, 11, 12]))
    shapes.view("src", "SELECT ticket_id + 0 AS ticket_id, subject, body, created_at, updated_at FROM raw")

    for table, run_id in (("raw", "run-raw"), ("src", "run-view")):
        settings = s.settings(db_engine, table)
        summary = s.run(settings, run_id, W, RunOptions(reprocess=True))
        assert (summary["status"], summary["succeeded"], summary["skipped"]) == ("succeeded", 5, 0), table
        assert set(s.items(db_engine, run_id).values()) == {("succeeded", None)}
    assert sorted(s.results(db_engine), key=int) == ["1", "2", "10", "11", "12"]


def test_mixed_id_types_are_all_processed(db_engine, shapes):
    if shapes.pg:  # one type per column: text holding numbers and names
        shapes.tickets_table(id_type="TEXT")
        ids = ["1", "2", "10", "A-7", "007", "3.5"]
        keys = ids
    else:  # an untyped column holding integers, text, reals and a blob
        shapes.tickets_table(id_type="")
        ids = [1, 2, 10, "A-7", "007", 3.5, 12.0, b"\xbe\xef"]
        keys = ["1", "2", "10", "A-7", "007", "3.5", "12", "X'BEEF'"]
    shapes.insert("src", rows(ids))
    settings = s.settings(db_engine)

    summary = s.run(settings, "run-1", W)

    assert (summary["status"], summary["succeeded"], summary["skipped"]) == ("succeeded", len(ids), 0)
    assert sorted(s.results(db_engine)) == sorted(keys)
    assert s.run(settings, "run-2", W)["backlog"] == 0


@pytest.mark.parametrize("id_type", ["uuid", "char", "numeric"])
def test_ids_of_other_column_types_are_found_again(db_engine, shapes, id_type):
    """UUIDs, blank-padded char(n) and numerics (on SQLite: the same values as text, text and reals)."""
    values = {
        "uuid": ["0b4c5c1e-7d7a-4b0e-9a65-3f2f6c2c9e01", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],
        "char": ["AB-1", "CD-22"],
        "numeric": [1.25, 100],
    }[id_type]
    if shapes.pg:
        shapes.tickets_table(id_type={"uuid": "UUID", "char": "CHAR(12)", "numeric": "NUMERIC(10, 2)"}[id_type])
        keys = {"uuid": values, "char": values, "numeric": ["1.25", "100.00"]}[id_type]
    else:
        shapes.tickets_table(id_type={"uuid": "TEXT", "char": "CHAR(12)", "numeric": "NUMERIC"}[id_type])
        keys = [str(v) for v in values]
    shapes.insert("src", rows(values))
    settings = s.settings(db_engine)

    summary = s.run(settings, "run-1", W)

    assert (summary["status"], summary["succeeded"], summary["skipped"]) == ("succeeded", 2, 0)
    assert sorted(s.results(db_engine)) == sorted(keys)
    named = s.run(settings, "run-2", W, RunOptions(ticket_ids=(keys[0],)))
    assert (named["succeeded"], named["skipped"]) == (1, 0)


def test_a_non_integer_value_in_an_integer_column_is_processed(db_engine, shapes):
    if shapes.pg:  # PostgreSQL cannot hold one: the nearest shape is a numeric column with fractions
        shapes.tickets_table(id_type="NUMERIC")
        ids, keys = [1, 2.5, 3], ["1", "2.5", "3"]
    else:
        shapes.tickets_table(id_type="INTEGER")
        ids, keys = [1, "abc", 2.5, 3], ["1", "abc", "2.5", "3"]
    shapes.insert("src", rows(ids))
    settings = s.settings(db_engine)

    shards = plan_run(settings, "run-1", W)
    for shard in shards:
        infer_shard(settings, "run-1", shard.shard, predictor=s.predictor(settings))
    load_results(settings, "run-1")
    summary = finish_run(settings, "run-1")

    assert (summary["status"], summary["succeeded"]) == ("succeeded", len(ids))
    assert sorted(s.results(db_engine)) == sorted(keys)


def test_long_ids_work_to_512_bytes_and_longer_ones_fail_alone(db_engine, shapes):
    shapes.tickets_table(id_type="TEXT")
    fits = ["x" * 200, "y" * 512, "é" * 256]  # 256 two-byte characters: 512 bytes
    too_long = ["z" * 600, "ü" * 300]  # 600 bytes each
    shapes.insert("src", rows([*fits, "short", *too_long]))
    settings = s.settings(db_engine, max_failure_rate=0.5)

    summary = s.run(settings, "run-1", W)

    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", 4, 2)
    assert summary["reasons"] == {"unsupported_id": 2}
    assert sorted(s.results(db_engine)) == sorted([*fits, "short"])
    failed = s.failures(db_engine)
    assert {(f.error_class, f.retryable, f.status) for f in failed} == {("unsupported_id", False, "dead_letter")}
    assert all(f.ticket_id.startswith("!unsupported-id:") and len(f.ticket_id) < 128 for f in failed)
    assert s.run(settings, "run-2", W)["backlog"] == 0  # dead-lettered: not failed again every night


def test_null_ids_fail_alone_with_a_typed_reason(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", [*rows([1, 2, 3]), ticket(None, "No ID", "a row without an ID", AT)])
    settings = s.settings(db_engine, max_failure_rate=0.5)

    summary = s.run(settings, "run-1", W)

    assert (summary["succeeded"], summary["failed"], summary["reasons"]) == (3, 1, {"unsupported_id": 1})
    assert sorted(s.results(db_engine)) == ["1", "2", "3"]


def test_limit_takes_the_lowest_ids_first_in_the_sources_own_order(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows([12, 2, 11, 1, 10]))
    settings = s.settings(db_engine)

    first = s.run(settings, "run-1", W, RunOptions(limit=3))
    second = s.run(settings, "run-2", W, RunOptions(limit=3))

    assert sorted(s.items(db_engine, "run-1"), key=int) == ["1", "2", "10"]  # numeric order, not 1, 10, 11
    assert sorted(s.items(db_engine, "run-2"), key=int) == ["11", "12"]
    assert (first["succeeded"], second["succeeded"]) == (3, 2)


def test_named_ids_the_column_cannot_hold_are_reported_missing(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows([1, 2]))
    settings = s.settings(db_engine)

    summary = s.run(settings, "run-1", W, RunOptions(ticket_ids=("abc", "2", "99999999999999999999999")))

    assert (summary["status"], summary["backlog"], summary["succeeded"]) == ("succeeded", 1, 1)


def test_mixed_case_names_as_orms_create_them(db_engine, shapes):
    # Prisma, Rails and .NET name tables and columns in mixed case ("Ticket", "createdAt"); Prisma's DateTime is
    # timestamp(3) without time zone, and its IDs are text (cuid)
    ts = "TIMESTAMP(3) WITHOUT TIME ZONE" if shapes.pg else "TEXT"
    shapes.table('"Ticket"', f'id TEXT PRIMARY KEY, title TEXT, description TEXT, "createdAt" {ts}, "updatedAt" {ts}')
    naive = AT.replace(tzinfo=None)
    shapes.insert(
        "Ticket",
        [
            {
                "id": f"clx{k:04d}abcd",
                "title": text(k)[0],
                "description": text(k)[1],
                "createdAt": naive,
                "updatedAt": naive,
            }
            for k in range(1, 6)
        ],
    )
    columns = dict(ticket_id="id", subject="title", body="description", created_at="createdAt", updated_at="updatedAt")

    summary = s.run(s.settings(db_engine, "Ticket", columns=columns), "run-1", W)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", 5)
    assert {k: r.content_hash for k, r in s.results(db_engine).items()} == {
        f"clx{k:04d}abcd": s.digest(*text(k)) for k in range(1, 6)
    }


ODD_IDS = ["INC0012345", "EU/2026/42", "#1234", "CAF+x7@mail.example", "Tíquet-7", "工单-8", "SUP-1234"]


def test_ids_as_help_desks_write_them_can_be_named_in_a_run(db_engine, shapes):
    # a run's ticket_ids take the keys real help desks use (slashes, #, mail Message-IDs, any script),
    # as the form, the REST API and --ticket-id send them
    shapes.tickets_table(id_type="TEXT")
    shapes.insert("src", rows([*ODD_IDS, "other"], at=W_BEFORE.start))
    named = parse_options({"ticket_ids": ODD_IDS[:-1]})

    summary = s.run(s.settings(db_engine), "run-1", W, named)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", len(ODD_IDS) - 1)
    assert sorted(s.results(db_engine)) == sorted(ODD_IDS[:-1])


# --- names as CSV imports keep them ----------------------------------------------------------------------------

# A help desk's CSV export imported as it is (pandas' to_sql, `sqlite3 .import`): headers with spaces, dashes,
# slashes, umlauts, quotes; on PostgreSQL in a schema whose name has a dot, quotes and a percent sign (psycopg2
# formats statements with %). Every name is quoted wherever it goes into SQL.
ODD_SCHEMA = 'help-desk.eu "prod" 100%'
ODD_TABLE = 'Help-Desk Export "2026"'
ODD_COLUMNS = dict(
    ticket_id="Ticket ID",
    subject="Betreff",
    body="Nachricht / Text",
    created_at="Created At",
    updated_at="Änderungsdatum",
)


@pytest.fixture
def odd_schema(db_engine, shapes):
    """PostgreSQL: ODD_SCHEMA, dropped at the end with all in it; SQLite has no schemas: None."""
    if not shapes.pg:
        yield None
        return
    shapes.sql(f"DROP SCHEMA IF EXISTS {quoted_name(ODD_SCHEMA)} CASCADE", f"CREATE SCHEMA {quoted_name(ODD_SCHEMA)}")
    try:
        yield ODD_SCHEMA
    finally:
        shapes.sql(f"DROP SCHEMA IF EXISTS {quoted_name(ODD_SCHEMA)} CASCADE")


def odd_table(shapes, schema: str | None, at: dict[int, dt.datetime]) -> str:
    """ODD_TABLE (in `schema`) holding ticket k (text(k)) created and updated at at[k]; returns its name as DDL
    writes it."""
    ts = shapes.ts()
    name = f"{quoted_name(schema)}.{quoted_name(ODD_TABLE)}" if schema else quoted_name(ODD_TABLE)
    c = {k: quoted_name(v) for k, v in ODD_COLUMNS.items()}
    unread = quoted_name('say "hi"')  # a column not read
    shapes.table(
        name,
        f"{c['ticket_id']} BIGINT, {c['subject']} TEXT, {c['body']} TEXT, {c['created_at']} {ts}, "
        f"{c['updated_at']} {ts}, {unread} TEXT",
    )
    values = [
        {ODD_COLUMNS[k]: v for k, v in ticket(k, *text(k), when).items()} | {'say "hi"': "not read"}
        for k, when in sorted(at.items())
    ]
    table = sa.table(ODD_TABLE, *[sa.column(n) for n in values[0]], schema=schema)
    with writing(shapes.engine) as conn:
        conn.execute(sa.insert(table), [shapes._value_row(v) for v in values])
    return name


def test_names_with_spaces_dashes_quotes_and_umlauts_are_read_end_to_end(db_engine, shapes, odd_schema):
    nights = {1: W_BEFORE.start + dt.timedelta(hours=1), 2: AT, 3: AT, 4: AT + dt.timedelta(hours=1)}
    nights |= {5: W_AFTER.start + dt.timedelta(hours=2), 6: AT}
    odd_table(shapes, odd_schema, nights)
    settings = s.settings(db_engine, ODD_TABLE, columns={**ODD_COLUMNS, "schema": odd_schema})

    seen = _three_nights(db_engine, settings, "odd")  # plan (with the start checks), infer, load, each night

    window_of = {k: "before" if at < W.start else "after" if at >= W.end else "night" for k, at in nights.items()}
    assert seen == {str(k): {window_of[k]} for k in nights}  # every ticket processed once, in its own night
    stored = s.results(db_engine)
    assert {k: r.content_hash for k, r in stored.items()} == {str(k): s.digest(*text(k)) for k in nights}
    assert {k: r.source_updated_at for k, r in stored.items()} == {str(k): at for k, at in nights.items()}

    # a rerun by ID reads those tickets again by key
    named = s.run(settings, "odd-named", W, RunOptions(ticket_ids=("2", "5", "404")))
    assert (named["status"], named["backlog"], named["succeeded"]) == ("succeeded", 2, 2)
    assert sorted(s.items(db_engine, "odd-named")) == ["2", "5"]

    # a changed ticket is found again by its key and replaced; the ID column's name is quoted in the lookups
    table = sa.table(ODD_TABLE, *[sa.column(n) for n in ODD_COLUMNS.values()], schema=odd_schema)
    later = W_AFTER.start + dt.timedelta(hours=5)
    with writing(db_engine) as conn:
        conn.execute(
            sa.update(table)
            .where(table.c["Ticket ID"] == 3)
            .values(
                {
                    "Nachricht / Text": "Now a different question.",
                    "Änderungsdatum": shapes._value_row({"t": later})["t"],
                }
            )
        )
    again = s.run(settings, "odd-changed", W_AFTER)
    assert (again["status"], again["backlog"], again["succeeded"]) == ("succeeded", 1, 1)  # 5 is unchanged
    assert sorted(s.items(db_engine, "odd-changed")) == ["3"]
    assert s.results(db_engine)["3"].content_hash == s.digest(text(3)[0], "Now a different question.")

    # a column the table lacks is named as it is set, quoted
    wrong = s.with_source(settings, updated_at="Änderungs datum")
    with pytest.raises(ConfigError, match='has no column\\(s\\) "Änderungs datum": set the TICKETS_COL_'):
        plan_run(wrong, "odd-wrong", W)


def test_the_privilege_and_start_checks_read_odd_names_as_names(db_engine, shapes, odd_schema):
    from inference.store.migrate import VERSION_TABLE
    from inference.store.privileges import check_privileges
    from inference.store.schema import OUR_TABLES
    from inference.store.source import Source

    odd_table(shapes, odd_schema, dict.fromkeys([1, 2, 3], AT))
    cols = s.settings(db_engine, ODD_TABLE, columns={**ODD_COLUMNS, "schema": odd_schema}).source
    check_privileges(db_engine, cols, OUR_TABLES, read_only=(VERSION_TABLE,))  # nothing missing, nothing raised
    source = Source(db_engine, cols)
    source.check()
    assert source.row_versions is shapes.pg and source.hashes_in_db is shapes.pg  # the relation found by name
    with db_engine.connect() as conn:
        assert sorted(source.existing(conn, ["1", "2", "3", "4"])) == ["1", "2", "3"]
    where = f"{quoted_name(ODD_SCHEMA)}.{quoted_name(ODD_TABLE)}" if shapes.pg else quoted_name(ODD_TABLE)
    assert source.where == where


def test_a_refused_column_with_an_odd_name_gets_a_fix_that_works(db_engine, shapes, odd_schema):
    # PostgreSQL: a JSON body column is refused at start; the view the message suggests quotes the name
    if not shapes.pg:
        pytest.skip("SQLite reads any value as text")
    c = {k: quoted_name(v) for k, v in ODD_COLUMNS.items()}
    raw = f"{quoted_name(odd_schema)}.{quoted_name('raw export')}"
    shapes.table(
        raw,
        f"{c['ticket_id']} BIGINT, {c['subject']} TEXT, {c['body']} JSONB, {c['created_at']} TIMESTAMPTZ, "
        f"{c['updated_at']} TIMESTAMPTZ",
    )
    shapes.sql(f"INSERT INTO {raw} VALUES (1, 'Card', '{{\"text\": \"Where is my card?\"}}', '{AT.isoformat()}', NULL)")
    columns = {**ODD_COLUMNS, "schema": odd_schema}
    with pytest.raises(ConfigError) as refused:
        plan_run(s.settings(db_engine, "raw export", columns=columns), "run-1", W)
    message = str(refused.value)
    assert (
        f'TICKETS_COL_BODY: column "Nachricht / Text" of {quoted_name(ODD_SCHEMA)}."raw export" is of type jsonb'
        in message
    )
    assert s.run_rows(db_engine) == 0
    fix = re.search(r"for example (.+?) AS \"Nachricht / Text\" for JSON", message)[1]
    assert fix == "\"Nachricht / Text\"->>'text'"
    view = f"{quoted_name(odd_schema)}.{quoted_name('Tickets (view)')}"
    shapes.view(
        view,
        f"SELECT {c['ticket_id']}, {c['subject']}, {fix} AS {c['body']}, {c['created_at']}, "
        f"{c['updated_at']} FROM {raw}",
    )
    summary = s.run(s.settings(db_engine, "Tickets (view)", columns=columns), "run-2", W)
    assert (summary["status"], summary["succeeded"]) == ("succeeded", 1)
    assert s.results(db_engine)["1"].content_hash == s.digest("Card", "Where is my card?")


INJECTIONS = ['src"; DROP TABLE src; --', "src; DROP TABLE src; --", "src' OR '1'='1"]


@pytest.mark.parametrize("name", INJECTIONS)
def test_a_name_shaped_like_sql_is_only_a_name(db_engine, shapes, name):
    shapes.tickets_table()
    shapes.insert("src", rows([1, 2, 3]))
    shown = quoted_name(name)

    with pytest.raises(ConfigError, match=f"source table {re.escape(shown)} does not exist"):
        plan_run(s.settings(db_engine, name), "run-1", W)
    for column in ("ticket_id", "body", "updated_at"):
        with pytest.raises(ConfigError, match=f"source table src has no column\\(s\\) {re.escape(shown)}"):
            plan_run(s.settings(db_engine, columns={column: name}), "run-1", W)
    if shapes.pg:
        with pytest.raises(ConfigError, match=f"source table {re.escape(shown)}.src does not exist"):
            plan_run(s.settings(db_engine, columns={"schema": name}), "run-1", W)

    assert s.run_rows(db_engine) == 0  # nothing written
    with db_engine.connect() as conn:  # the real table is still there, whole
        assert conn.scalar(sa.select(sa.func.count()).select_from(sa.table("src"))) == 3
    summary = s.run(s.settings(db_engine), "run-2", W)
    assert (summary["status"], summary["succeeded"]) == ("succeeded", 3)


# --- timestamps ------------------------------------------------------------------------------------------------


def _three_nights(engine, settings, tag: str) -> dict[str, set[str]]:
    """ticket -> the windows (of the night before, the night, the night after) that processed it."""
    seen: dict[str, set[str]] = {}
    for name, window in (("before", W_BEFORE), ("night", W), ("after", W_AFTER)):
        run_id = f"{tag}-{name}"
        summary = s.run(settings, run_id, window)
        assert summary["status"] == "succeeded", summary
        for ticket_id in s.items(engine, run_id):
            seen.setdefault(ticket_id, set()).add(name)
    return seen


# instant (UTC) -> the text another application wrote for it
STAMPS = {
    1: (W.start - dt.timedelta(minutes=30), "2026-11-30 06:30:00+05:00"),  # 01:30 UTC: the night before
    2: (W.start + dt.timedelta(minutes=90), "2026-11-30 01:30:00-02:00"),  # 03:30 UTC: the night
    3: (W.start, "2026-11-30T02:00:00Z"),  # the window's first instant
    4: (W.end - dt.timedelta(microseconds=1), "2026-12-01T01:59:59.999999"),  # naive UTC, 'T'
    5: (W.end, "2026-12-01 07:30:00.000+05:30"),  # 02:00 UTC: the night after
    6: (W.start + dt.timedelta(hours=12), "2026-11-30 14:00:00.000000"),  # naive UTC, as SQLAlchemy writes
    7: (W.end - dt.timedelta(minutes=1), "2026-12-01 15:59:00+14:00"),  # Kiribati: 01:59 UTC
    8: (W.start - dt.timedelta(hours=1), "2026-11-29T20:00-05:00"),  # 01:00 UTC: the night before
}
WINDOW_OF = {k: "before" if t < W.start else "after" if t >= W.end else "night" for k, (t, _) in STAMPS.items()}


def test_text_timestamps_with_offsets_are_selected_by_instant(db_engine, shapes):
    shapes.tickets_table(ts="TEXT")  # ISO-8601 text, as another application writes it (both databases)
    shapes.insert("src", [ticket(k, *text(k), stamp) for k, (_, stamp) in STAMPS.items()])
    settings = s.settings(db_engine)

    seen = _three_nights(db_engine, settings, "text")

    assert seen == {str(k): {WINDOW_OF[k]} for k in STAMPS}  # each ticket once, by the night of its instant
    assert {k: r.source_updated_at for k, r in s.results(db_engine).items()} == {
        str(k): t for k, (t, _) in STAMPS.items()
    }


def test_aware_timestamps_with_offsets_are_selected_by_instant(db_engine, shapes):
    shapes.tickets_table()  # timestamptz on PostgreSQL; ISO text with offsets on SQLite
    zones = [dt.timezone(dt.timedelta(hours=h)) for h in (5, -2, 0, 0, 5.5, 0, 14, -5)]
    shapes.insert(
        "src", [ticket(k, *text(k), t.astimezone(z)) for (k, (t, _)), z in zip(STAMPS.items(), zones, strict=True)]
    )
    settings = s.settings(db_engine)

    assert _three_nights(db_engine, settings, "aware") == {str(k): {WINDOW_OF[k]} for k in STAMPS}


def _rfc2822(instant: dt.datetime, hours: float) -> str:
    """As mail writes it, in a zone `hours` from UTC; a fraction of a second is cut (RFC 2822 has none)."""
    local = instant.astimezone(dt.timezone(dt.timedelta(hours=hours)))
    return email.utils.format_datetime(local.replace(microsecond=0))


def _twelve_hour(local: dt.datetime) -> str:
    return f"{local.hour % 12 or 12}:{local:%M:%S}.{local.microsecond:06d} {'PM' if local.hour >= 12 else 'AM'}"


def _zone_named(instant: dt.datetime, k: int) -> str:
    """Java's ZonedDateTime.toString (offset, then the zone's name) or a local time and a bare zone name."""
    if k % 2:
        return f"{instant.astimezone(zoneinfo.ZoneInfo(BERLIN)).isoformat()}[{BERLIN}]"
    local = instant.astimezone(zoneinfo.ZoneInfo("America/New_York")).replace(tzinfo=None)
    return f"{local:%Y-%m-%d %H:%M:%S.%f} America/New_York"


# shape -> (TICKETS_SOURCE_DATE_ORDER, instant -> the text another application wrote for it)
_MONTHS_IN = {  # as help desks in other countries export them: full names and the usual abbreviations
    "de": ("Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sept.", "Okt.", "Nov.", "Dez."),
    "fr": ("janv.", "févr.", "mars", "avril", "mai", "juin", "juil.", "août", "sept.", "octobre", "novembre", "déc."),
    "es": ("enero", "feb.", "marzo", "abril", "mayo", "junio", "julio", "agosto", "sept.", "oct.", "noviembre", "dic."),
    "it": ("gen", "feb", "mar", "apr", "mag", "giu", "lug", "ago", "set", "ottobre", "novembre", "dicembre"),
    "nl": ("jan.", "feb.", "mrt.", "apr.", "mei", "jun.", "jul.", "aug.", "sep.", "okt.", "nov.", "dec."),
    "pt": ("janeiro", "fev.", "março", "abr.", "maio", "junho", "julho", "ago.", "set.", "out.", "novembro", "dez."),
}


def _localized(t: dt.datetime, k: int) -> str:
    """Ticket k's instant (UTC, no zone written) as a German, French, Spanish, Italian, Dutch or Portuguese
    export writes it."""
    lang = ("de", "fr", "es", "it", "nl", "pt")[k % 6]
    month, clock = _MONTHS_IN[lang][t.month - 1], f"{t:%H:%M:%S}"
    return {
        "de": f"{('Mo', 'Di', 'Mi', 'Do', 'Fr', 'Sa', 'So')[t.weekday()]}, {t.day}. {month} {t.year}, {clock} Uhr",
        "fr": f"{('lundi', 'mardi', 'mercredi', 'jeudi', 'vendredi', 'samedi', 'dimanche')[t.weekday()]} {t.day} "
        f"{month} {t.year} à {clock}",
        "es": f"{t.day} de {month} de {t.year} a las {clock}",
        "it": f"{t.day} {month} {t.year} alle {clock}",
        "nl": f"{t.day} {month} {t.year} om {clock}",
        "pt": f"{t.day} de {month} de {t.year} às {clock}",
    }[lang]


def _unix_digits(instant: dt.datetime, k: int) -> str:
    micros = (instant - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    return str(micros) if k % 2 else f"{micros // 10**6}.{micros % 10**6:06d}"


OTHER_TEXT = {
    "RFC 2822": (None, lambda t, k: _rfc2822(t, (5, -2, 0, 0, 5.5, 0, 14, -5)[k - 1])),
    "day first": ("dmy", lambda t, k: f"{t:%d/%m/%Y %H:%M:%S}.{t.microsecond:06d}"),  # naive UTC
    "month first, 12-hour": ("mdy", lambda t, k: f"{t:%m/%d/%Y} {_twelve_hour(t)} +00:00"),
    "dotted": (None, lambda t, k: f"{t:%d.%m.%Y %H:%M:%S}.{t.microsecond:06d}Z"),  # day-first, no setting
    "month names": (None, lambda t, k: f"{t:%a, %b} {t.day}, {t:%Y} at {_twelve_hour(t)} UTC"),
    "clock before the year": (None, lambda t, k: f"{t:%a %b %d %H:%M:%S} GMT {t:%Y}"),  # Java's Date.toString
    "month names in other languages": (None, lambda t, k: _localized(t, k)),
    "zone names": (None, lambda t, k: _zone_named(t, k)),
    # Unix times left as text by a CSV import or a JSON API: seconds with a fraction, or microseconds
    "Unix times as digits": (None, lambda t, k: _unix_digits(t, k)),
    # ISO-8601's basic format, as LDAP, iCalendar and SAP exports write it
    "basic format": (
        None,
        lambda t, k: (
            f"{t:%Y%m%d%H%M%S}.{t.microsecond:06d}Z" if k % 2 else f"{t:%Y%m%dT%H%M%S},{t.microsecond:06d}+0000"
        ),
    ),
    # after a migration: ISO and RFC 2822 in one column, and ISO with a leading space (no text range holds it)
    "mixed": (
        None,
        lambda t, k: (
            _rfc2822(t, -5) if k % 3 == 0 else f" {t.isoformat()}" if k % 3 == 1 else f"{t:%Y-%m-%d %H:%M:%S.%f}Z"
        ),
    ),
}


@pytest.mark.parametrize("shape", list(OTHER_TEXT))
def test_text_timestamps_in_other_shapes_are_selected_by_instant(db_engine, shapes, shape):
    # what help desks, mail systems and spreadsheets export: each value read alone, the column scanned whole
    order, write = OTHER_TEXT[shape]
    shapes.tickets_table(ts="TEXT")
    values = {k: write(t, k) for k, (t, _) in STAMPS.items()}
    shapes.insert("src", [ticket(k, *text(k), v) for k, v in values.items()])
    settings = s.settings(db_engine, columns={"date_order": order})

    seen = _three_nights(db_engine, settings, "other")

    assert seen == {str(k): {WINDOW_OF[k]} for k in STAMPS}  # each ticket once, by the night of its instant
    seconds_only = shape in ("RFC 2822", "clock before the year", "month names in other languages", "mixed")
    expected = {
        str(k): t.replace(microsecond=0) if seconds_only and (shape != "mixed" or k % 3 == 0) else t
        for k, (t, _) in STAMPS.items()
    }
    assert {k: r.source_updated_at for k, r in s.results(db_engine).items()} == expected


def test_a_table_without_an_update_time_uses_its_creation_time_for_both(db_engine, shapes):
    # many exports carry one timestamp: TICKETS_COL_UPDATED_AT may name the same column as TICKETS_COL_CREATED_AT
    shapes.table("src", f"ticket_id INTEGER, subject TEXT, body TEXT, created_at {shapes.ts()}")
    shapes.insert(
        "src", [dict(ticket_id=k, subject=text(k)[0], body=text(k)[1], created_at=t) for k, (t, _) in STAMPS.items()]
    )
    settings = s.settings(db_engine, columns={"updated_at": "created_at"})

    assert _three_nights(db_engine, settings, "one-stamp") == {str(k): {WINDOW_OF[k]} for k in STAMPS}
    assert {k: r.source_updated_at for k, r in s.results(db_engine).items()} == {
        str(k): t for k, (t, _) in STAMPS.items()
    }


@pytest.mark.parametrize("subject", ["none", "message"])
def test_a_table_without_a_subject_column_reads_its_body_once(db_engine, shapes, subject):
    # chat transcripts, web forms and SMS carry one text column: TICKETS_COL_SUBJECT=none, or the body's own
    # column; the body is read once (never doubled into the model's input), on a table and through a view
    shapes.table("chats", f"id {'BIGINT' if shapes.pg else 'INTEGER'}, message TEXT, created {shapes.ts()}")
    shapes.insert("chats", [dict(id=k, message=text(k)[1], created=AT) for k in range(1, 8)])
    columns = dict(ticket_id="id", subject=subject, body="message", created_at="created", updated_at="created")
    settings = s.settings(db_engine, "chats", columns=columns)
    assert settings.source.subject is None

    summary = s.run(settings, "run-1", W)

    assert summary["status"] == "succeeded" and final_states(db_engine, "run-1") == {"succeeded": 7}
    expected = {str(k): s.digest(None, text(k)[1]) for k in range(1, 8)}
    assert {k: r.content_hash for k, r in s.results(db_engine).items()} == expected
    shapes.view("src", "SELECT id, message, created FROM chats")  # no row versions: the text is read again
    with writing(db_engine) as conn:
        conn.execute(sa.text("UPDATE chats SET message = :m WHERE id = 3"), {"m": "Where is my parcel?"})
    again = s.run(s.settings(db_engine, "src", columns=columns), "run-2", W, RunOptions(reprocess=True))
    assert again["status"] == "succeeded" and final_states(db_engine, "run-2") == {"succeeded": 7}
    expected["3"] = s.digest(None, "Where is my parcel?")
    assert {k: r.content_hash for k, r in s.results(db_engine).items()} == expected


BERLIN = "Europe/Berlin"
# naive local times in Berlin around the DST changes of 2026 (back on Oct 25 at 01:00 UTC, forward on Mar 29
# at 01:00 UTC) -> the UTC day of the nightly window each instant falls in
DST_TICKETS = {
    1: ("2026-10-25 02:30:00", dt.date(2026, 10, 24)),  # ambiguous: its first occurrence (CEST): 00:30 UTC
    2: ("2026-10-25 02:59:59", dt.date(2026, 10, 24)),  # ambiguous: 00:59:59 UTC
    3: ("2026-10-25 03:30:00", dt.date(2026, 10, 25)),  # CET: 02:30 UTC
    4: ("2026-10-25 02:00:00", dt.date(2026, 10, 24)),  # ambiguous: 00:00 UTC
    5: ("2026-10-26 02:59:00", dt.date(2026, 10, 25)),  # CET: 01:59 UTC on the 26th: the 25th's window
    6: ("2026-03-29 02:30:00", dt.date(2026, 3, 28)),  # does not exist: read with the offset before (CET): 01:30 UTC
    7: ("2026-03-29 03:59:00", dt.date(2026, 3, 28)),  # CEST: 01:59 UTC: the 28th's window
    8: ("2026-03-29 04:00:00", dt.date(2026, 3, 29)),  # CEST: 02:00 UTC: the 29th's window
}


def _naive_source(shapes) -> None:
    """Naive local times: `timestamp without time zone` on PostgreSQL, ISO text without offset on SQLite."""
    shapes.tickets_table(ts="TIMESTAMP WITHOUT TIME ZONE" if shapes.pg else "TEXT")


def test_dst_transitions_put_each_ticket_in_exactly_one_nightly_window(db_engine, shapes):
    _naive_source(shapes)
    shapes.insert("src", [ticket(k, *text(k), local) for k, (local, _) in DST_TICKETS.items()])
    settings = s.with_source(s.settings(db_engine), timezone=BERLIN)
    days = sorted({d + dt.timedelta(days=n) for _, d in DST_TICKETS.values() for n in (-1, 0, 1)})

    seen: dict[str, list[dt.date]] = {}
    for day in days:
        run_id = f"dst-{day}"
        assert s.run(settings, run_id, window_for_date(day))["status"] == "succeeded"
        for ticket_id in s.items(db_engine, run_id):
            seen.setdefault(ticket_id, []).append(day)

    assert seen == {str(k): [day] for k, (_, day) in DST_TICKETS.items()}


def test_naive_timestamps_in_a_zone_are_selected_by_instant(db_engine, shapes):
    _naive_source(shapes)
    berlin = {  # local Berlin time (CET, +01:00) -> night
        1: ("2026-11-30 02:30:00", "before"),  # 01:30 UTC
        2: ("2026-11-30 03:00:00", "night"),  # 02:00 UTC
        3: ("2026-12-01 02:59:59", "night"),  # 01:59:59 UTC
        4: ("2026-12-01 03:00:00", "after"),  # 02:00 UTC
    }
    shapes.insert("src", [ticket(k, *text(k), local) for k, (local, _) in berlin.items()])
    settings = s.with_source(s.settings(db_engine), timezone=BERLIN)

    assert _three_nights(db_engine, settings, "berlin") == {str(k): {night} for k, (_, night) in berlin.items()}


SESSION_STAMPS = {1: "2026-11-30 02:30:00", 2: "2026-11-30 03:30:00", 3: "2026-12-01 03:30:00"}


@pytest.mark.parametrize("zone", ["UTC", BERLIN])
@pytest.mark.parametrize("column_type", ["TIMESTAMP WITHOUT TIME ZONE", "TIMESTAMP WITH TIME ZONE"])
def test_timestamps_written_in_the_databases_own_session_time_zone(pg_admin_url, zone, column_type):
    """PostgreSQL, a database whose sessions default to `zone`; a writer's session stores local times.
    `timestamp with time zone` is read by instant whatever the zone; `timestamp without time zone` is naive
    UTC in a UTC database, and refused at start in a Berlin one (its values may be local times) until
    TICKETS_SOURCE_TIMEZONE names their zone; then read by instant."""
    from inference.store.db import make_engine

    with s.database_of_its_own(pg_admin_url, "inference_tz", timezone=zone) as url:
        engine = make_engine(url)
        try:
            Shapes(engine).tickets_table(ts=column_type)
            local = sa.create_engine(url)  # a writer's session, in the database's own time zone
            with local.begin() as conn:
                assert conn.exec_driver_sql("SHOW TimeZone").scalar() == zone
                for k, stamp in SESSION_STAMPS.items():
                    subject, body = text(k)
                    conn.execute(
                        sa.text("INSERT INTO src VALUES (:k, :s, :b, CAST(:t AS timestamp), CAST(:t AS timestamp))"),
                        dict(k=k, s=subject, b=body, t=stamp),
                    )
            local.dispose()
            settings = s.settings(engine)
            if column_type == "TIMESTAMP WITHOUT TIME ZONE" and zone != "UTC":
                with pytest.raises(ConfigError) as refused:
                    plan_run(settings, "run-refused", W)
                message = str(refused.value)
                assert "TICKETS_COL_CREATED_AT" in message and "created_at" in message and zone in message
                assert "TICKETS_SOURCE_TIMEZONE" in message
                assert s.run_rows(engine) == 0 and not sa.inspect(engine).has_table("ticket_results")
                settings = s.with_source(settings, timezone=zone)
            summary = s.run(settings, "run-1", W)
            tz = zoneinfo.ZoneInfo(zone)
            instants = {k: dt.datetime.fromisoformat(v).replace(tzinfo=tz) for k, v in SESSION_STAMPS.items()}
            expected = sorted(str(k) for k, t in instants.items() if W.start <= t < W.end)
            assert expected == (["1", "2"] if zone == "UTC" else ["2"])  # Berlin 02:30 is 01:30 UTC
            assert (summary["status"], sorted(s.items(engine, "run-1"))) == ("succeeded", expected)
            stored = {k: r.source_updated_at for k, r in s.results(engine).items()}
            assert stored == {k: instants[int(k)] for k in expected}
        finally:
            engine.dispose()


def _unix(instant: dt.datetime, per_second: int, kind: str):
    """`instant` as a Unix time in a unit: an int, a float or a Decimal (of seconds with a fraction)."""
    micros = (instant - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    if kind == "int":
        return micros * per_second // 10**6
    return micros / 10**6 if kind == "float" else decimal.Decimal(micros) / 10**6


@pytest.mark.parametrize(
    "column,kind", [("BIGINT", "int"), ("DOUBLE PRECISION", "float"), ("NUMERIC(20, 6)", "decimal")]
)
def test_unix_times_in_any_unit_are_selected_by_instant(db_engine, shapes, column, kind):
    # numbers as help desks and event pipelines store them: seconds, milliseconds, microseconds or nanoseconds
    # since 1970 (integers: every unit, told apart by magnitude), or seconds with a fraction (float, numeric)
    shapes.tickets_table(ts=column)
    units = [1, 10**3, 10**6, 10**9] if kind == "int" else [1]
    values = {k: _unix(t, units[k % len(units)], kind) for k, (t, _) in STAMPS.items()}
    if kind == "decimal" and not shapes.pg:  # sqlite3 binds no Decimal: text, which NUMERIC affinity makes a number
        values = {k: str(v) for k, v in values.items()}
    shapes.insert("src", [ticket(k, *text(k), v) for k, v in values.items()])
    settings = s.settings(db_engine)

    seen = _three_nights(db_engine, settings, f"unix-{kind}")

    assert seen == {str(k): {WINDOW_OF[k]} for k in STAMPS}  # each ticket once, by the night of its instant
    stored = {k: r.source_updated_at for k, r in s.results(db_engine).items()}
    if kind == "int":  # exact to the unit: seconds and milliseconds lose what is below them
        expected = {
            str(k): t - dt.timedelta(microseconds=t.microsecond % (10**6 // min(units[k % len(units)], 10**6)))
            for k, (t, _) in STAMPS.items()
        }
    else:
        expected = {str(k): t for k, (t, _) in STAMPS.items()}
    assert stored == expected


@pytest.mark.parametrize(
    "column,digits", [("BIGINT", 14), ("NUMERIC(15, 0)", 14), ("DOUBLE PRECISION", 12), ("INTEGER", 8)]
)
def test_compact_dates_in_number_columns_are_local_times_selected_by_instant(db_engine, shapes, column, digits):
    # SAP keeps timestamps as DEC 15 numbers (YYYYMMDDhhmmss), data warehouses dates as integer keys (YYYYMMDD):
    # local times in TICKETS_SOURCE_TIMEZONE, each read as the instant it stands for, once, in its own night
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    shapes.tickets_table(ts=column)
    values = {k: int(t.astimezone(berlin).strftime("%Y%m%d%H%M%S")[:digits]) for k, (t, _) in STAMPS.items()}
    shapes.insert("src", [ticket(k, *text(k), v) for k, v in values.items()])
    settings = s.with_source(s.settings(db_engine), timezone="Europe/Berlin")

    seen = _three_nights(db_engine, settings, f"compact-{digits}")

    def instant(value: int) -> dt.datetime:  # the local time, cut to the form's last field
        local = dt.datetime.strptime(str(value).ljust(14, "0"), "%Y%m%d%H%M%S")
        return local.replace(tzinfo=berlin).astimezone(dt.UTC)

    at = {str(k): instant(v) for k, v in values.items()}
    nights = {k: "before" if t < W.start else "after" if t >= W.end else "night" for k, t in at.items()}
    assert all(W_BEFORE.start <= t < W_AFTER.end for t in at.values())
    assert seen == {k: {night} for k, night in nights.items()}
    if digits == 14:  # to the second: the same nights as the instants themselves
        assert nights == {str(k): WINDOW_OF[k] for k in STAMPS}
    assert {k: r.source_updated_at for k, r in s.results(db_engine).items()} == at


def test_numbers_of_no_compact_date_are_refused_at_start(db_engine, shapes):
    # 20261330050000 is in the compact span but has month 13: refused, not passed over
    shapes.tickets_table(ts="BIGINT")
    good = [ticket(k, *text(k), 20261130050000 + k) for k in (1, 2)]
    shapes.insert("src", [*good, ticket(3, "a", "b", 20261330050000)])

    with pytest.raises(ConfigError) as refused:
        plan_run(s.settings(db_engine), "run-1", W)

    message = str(refused.value)
    assert "TICKETS_COL_CREATED_AT: 1 value(s)" in message and "created_at of src" in message
    assert "YYYYMMDDhhmmss" in message and "20261330" not in message  # counts, never values
    assert s.run_rows(db_engine) == 0


UNREADABLE_TEXT = {  # shape -> (TICKETS_SOURCE_DATE_ORDER, the value)
    "garbage": (None, "soon"),
    "two-digit year": (None, "30/11/26 05:00"),
    "a zone of many meanings": (None, "2026-11-30 05:00 IST"),
    "digits of no Unix time": (None, "20261330"),  # no Unix time (1970 as seconds), no date (month 13)
    "against the date order": ("mdy", "30/11/2026 05:00"),
}


@pytest.mark.parametrize("shape", [*UNREADABLE_TEXT, "not a Unix time", "wrong type"])
def test_unreadable_timestamps_are_refused_at_start_naming_the_column(db_engine, shapes, shape):
    if shape in ("not a Unix time", "wrong type"):  # a counter in a number column; a boolean (SQLite: 0 or 1)
        column = "BOOLEAN" if shape == "wrong type" else "BIGINT"
        shapes.table(
            "src", f"ticket_id INTEGER, subject TEXT, body TEXT, created_at {shapes.ts()}, updated_at {column}"
        )
        value = True if shape == "wrong type" else 42
        shapes.insert("src", [dict(ticket_id=1, subject="a", body="b", created_at=AT, updated_at=value)])
    else:  # text that is no readable timestamp
        shapes.tickets_table(ts="TEXT")
        order, value = UNREADABLE_TEXT[shape]
        shapes.insert("src", [*rows([1, 2]), dict(ticket_id=3, subject="a", body="b", created_at=AT, updated_at=value)])
    settings = s.settings(db_engine, columns={"date_order": order} if shape in UNREADABLE_TEXT else None)

    with pytest.raises(ConfigError) as refused:
        plan_run(settings, "run-1", W)

    message = str(refused.value)
    assert "TICKETS_COL_UPDATED_AT" in message and "column updated_at of src" in message
    assert "view" in message  # the fix: point the setting at a view column that converts the values
    if shape == "not a Unix time":
        assert "Unix time between 1980 and 2200" in message
    assert s.run_rows(db_engine) == 0  # nothing written


def test_iso_shaped_text_of_no_real_date_is_refused_not_passed_over(db_engine, shapes):
    # "2026-13-45" sorts outside every window's text range: unless the start check reads it, its ticket would
    # never be in any window, without a word
    shapes.tickets_table(ts="TEXT")
    bad = "2026-13-45 05:00:00"
    shapes.insert("src", [*rows([1, 2]), dict(ticket_id=3, subject="a", body="b", created_at=bad, updated_at=bad)])

    with pytest.raises(ConfigError, match="TICKETS_COL_CREATED_AT: 1 value.s. of column created_at of src"):
        plan_run(s.settings(db_engine), "run-1", W)
    assert s.run_rows(db_engine) == 0


@pytest.mark.parametrize("case", ["either order", "both orders"])
def test_numeric_dates_that_need_a_date_order_are_refused_until_it_is_set(db_engine, shapes, case):
    # 05/11/2026 is the 5th of November or the 11th of May: a column of such dates is read only with the
    # order set; a column whose dates contradict each other (30/11 and 11/30) is misread in either order
    shapes.tickets_table(ts="TEXT")
    values = ["30/11/2026 05:00", "05/11/2026 05:00"] if case == "either order" else ["30/11/2026", "11/30/2026"]
    shapes.insert("src", [ticket(k, *text(k), v) for k, v in enumerate(values, start=1)])

    with pytest.raises(ConfigError) as refused:
        plan_run(s.settings(db_engine), "run-1", W)

    message = str(refused.value)
    assert "TICKETS_COL_CREATED_AT" in message and "column created_at of src" in message
    assert "30/11" not in message and "11/30" not in message  # counts, never values
    if case == "either order":
        assert "1 value(s)" in message and "TICKETS_SOURCE_DATE_ORDER to dmy or mdy" in message
        assert "read dmy only" in message  # what the column's other values tell
        assert s.run_rows(db_engine) == 0
        summary = s.run(s.settings(db_engine, columns={"date_order": "dmy"}), "run-2", W)
        assert summary["status"] == "succeeded" and set(s.items(db_engine, "run-2")) == {"1"}  # 5 Nov: not in W
    else:
        assert "day-first (1)" in message and "month-first (1)" in message
        assert s.run_rows(db_engine) == 0


def test_text_stored_in_other_shapes_is_read_as_text_or_refused_with_a_fix_that_works(db_engine, shapes):
    # SQLite holds what it is given whatever the declared type: a blob of UTF-8, a number; PostgreSQL columns
    # of other types (JSON, bytea, arrays, numbers) are refused at start, naming the column and a view that works
    if not shapes.pg:
        shapes.table("src", f"ticket_id INTEGER, subject, body BLOB, created_at {shapes.ts()}, updated_at TEXT")
        shapes.sql(
            f"INSERT INTO src VALUES (1, 'Card', X'{b'Where is my card?'.hex()}', '{AT.isoformat()}', NULL)",
            f"INSERT INTO src VALUES (2, 12345, 67.5, '{AT.isoformat()}', NULL)",
            f"INSERT INTO src VALUES (3, 'Login', X'{'Passwort vergessen: Grüße'.encode().hex()}', '{AT.isoformat()}', NULL)",
        )
        summary = s.run(s.settings(db_engine), "run-1", W)
        assert summary["status"] == "succeeded" and final_states(db_engine, "run-1") == {"succeeded": 3}
        stored = s.results(db_engine)
        assert stored["1"].content_hash == s.digest("Card", "Where is my card?")
        assert stored["2"].content_hash == s.digest("12345", "67.5")
        assert stored["3"].content_hash == s.digest("Login", "Passwort vergessen: Grüße")
        return
    shapes.table("raw", "ticket_id BIGINT, subject TEXT, body JSONB, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ")
    shapes.sql(
        'INSERT INTO raw VALUES (1, \'Card\', \'{"text": "Where is my card?", "lang": "en"}\', '
        f"'{AT.isoformat()}', NULL)"
    )
    for body_type, value in (("BYTEA", "'x'::bytea"), ("TEXT[]", "ARRAY['a']"), ("INTEGER", "7")):
        shapes.table(
            "other", f"ticket_id BIGINT, subject TEXT, body {body_type}, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ"
        )
        shapes.sql(f"INSERT INTO other VALUES (1, 'a', {value}, '{AT.isoformat()}', NULL)")
        with pytest.raises(ConfigError, match="TICKETS_COL_BODY: column body of other is of type"):
            plan_run(s.settings(db_engine, "other"), "run-0", W)

    with pytest.raises(ConfigError) as refused:
        plan_run(s.settings(db_engine, "raw"), "run-1", W)

    message = str(refused.value)
    assert "TICKETS_COL_BODY: column body of raw is of type jsonb, not text" in message
    assert s.run_rows(db_engine) == 0  # nothing written
    fix = re.search(r"for example (.+?) AS body for JSON", message)[1]  # the view the message suggests
    shapes.view("src", f"SELECT ticket_id, subject, {fix} AS body, created_at, updated_at FROM raw")
    summary = s.run(s.settings(db_engine), "run-2", W)
    assert summary["status"] == "succeeded"
    assert s.results(db_engine)["1"].content_hash == s.digest("Card", "Where is my card?")


# --- updated_at going backwards --------------------------------------------------------------------------------


def test_a_text_change_with_updated_at_moving_back_replaces_the_stale_result(db_engine, shapes):
    shapes.tickets_table()
    late = AT + dt.timedelta(hours=5)
    shapes.insert("src", [ticket(1, "Refund", "first text", AT, late), ticket(2, "Login", "unchanged", AT)])
    settings = s.settings(db_engine)
    assert s.run(settings, "run-1", W)["succeeded"] == 2

    back = AT + dt.timedelta(hours=1)  # a restore, clock skew: the new text has an older updated_at
    stamp = back if shapes.pg else back.isoformat()
    with writing(db_engine) as conn:
        conn.execute(sa.text("UPDATE src SET body = 'second text', updated_at = :t WHERE ticket_id = 1"), {"t": stamp})

    summary = s.run(settings, "run-2", W)

    assert (summary["status"], summary["backlog"], summary["succeeded"], summary["skipped"]) == ("succeeded", 1, 1, 0)
    stored = s.results(db_engine)["1"]
    assert (stored.content_hash, stored.source_updated_at, stored.run_id) == (
        s.digest("Refund", "second text"),
        back,
        "run-2",
    )
    assert s.run(settings, "run-3", W)["backlog"] == 0  # and it stays current

    # once more, into an earlier night; a named run and a reprocess both write it, never "superseded"
    earlier = W_BEFORE.start + dt.timedelta(hours=2)
    stamp = earlier if shapes.pg else earlier.isoformat()
    with writing(db_engine) as conn:
        conn.execute(sa.text("UPDATE src SET body = 'third text', updated_at = :t WHERE ticket_id = 1"), {"t": stamp})
    named = s.run(settings, "run-4", W_AFTER, RunOptions(ticket_ids=("1",)))
    assert (named["succeeded"], named["skipped"]) == (1, 0)
    assert s.results(db_engine)["1"].content_hash == s.digest("Refund", "third text")
    redo = s.run(settings, "run-5", W_BEFORE, RunOptions(reprocess=True))
    assert (redo["succeeded"], redo["skipped"]) == (1, 0)


# --- two model versions ----------------------------------------------------------------------------------------


def _planned_and_inferred(settings, run_id):
    model = s.predictor(settings)
    for shard in plan_run(settings, run_id, W):
        infer_shard(settings, run_id, shard.shard, predictor=model)


def test_a_late_load_of_an_older_model_version_never_replaces_the_current_one(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows([1, 2, 3, 4, 5]))
    v1 = s.settings(db_engine, model_version="standin@v1")
    v2 = s.settings(db_engine, model_version="standin@v2")
    _planned_and_inferred(v1, "run-old")  # a backfill on the old model, still loading...
    _planned_and_inferred(v2, "run-new")  # ...when the new model's nightly run is planned and loaded
    load_results(v2, "run-new")
    assert finish_run(v2, "run-new")["succeeded"] == 5

    load_results(v1, "run-old")  # late

    assert {r.model_version for r in s.results(db_engine).values()} == {"standin@v2"}
    old = finish_run(v1, "run-old")
    assert (old["status"], old["skipped"], old["reasons"]) == ("succeeded", 5, {"model_outdated": 5})
    assert set(s.items(db_engine, "run-old").values()) == {("skipped", "model_outdated")}


def test_concurrent_loads_of_two_model_versions_end_with_the_current_one(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows(range(1, 21)))
    v1 = s.settings(db_engine, model_version="standin@v1", chunk_size=2)
    v2 = s.settings(db_engine, model_version="standin@v2", chunk_size=2)
    _planned_and_inferred(v1, "run-old")
    _planned_and_inferred(v2, "run-new")  # planned last: the current version
    errors = []

    def load(settings, run_id):
        try:
            load_results(settings, run_id)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=load, args=a) for a in ((v1, "run-old"), (v2, "run-new"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert {r.model_version for r in s.results(db_engine).values()} == {"standin@v2"}
    assert len(s.results(db_engine)) == 20
    new, old = finish_run(v2, "run-new"), finish_run(v1, "run-old")
    assert (new["status"], new["succeeded"]) == ("succeeded", 20)
    assert old["status"] == "succeeded" and old["succeeded"] + old["skipped"] == 20
    assert set(old["reasons"]) <= {"model_outdated"}


# --- deleted tickets -------------------------------------------------------------------------------------------


def test_results_of_deleted_tickets_are_retracted_by_the_next_run(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows(range(1, 8)))
    settings = s.settings(db_engine)
    assert s.run(settings, "run-1", W)["succeeded"] == 7
    with writing(db_engine) as conn:
        conn.execute(sa.text("DELETE FROM src WHERE ticket_id IN (2, 5)"))

    summary = s.run(settings, "run-2", W_AFTER)  # any night, even one with nothing to process

    assert (summary["status"], summary["backlog"], summary["retracted"]) == ("succeeded", 0, 2)
    assert sorted(s.results(db_engine), key=int) == ["1", "3", "4", "6", "7"]
    assert re.search(r"results of deleted tickets removed +2\n", report_text(db_engine, "run-2"))

    archive = dataclasses.replace(settings, retract_deleted=False)  # a source that archives (deletes) tickets
    with writing(db_engine) as conn:
        conn.execute(sa.text("DELETE FROM src WHERE ticket_id = 7"))
    kept = s.run(archive, "run-3", W_AFTER)
    assert (kept["retracted"], "7" in s.results(db_engine)) == (0, True)


def test_a_ticket_leaving_a_view_is_retracted(db_engine, shapes):
    shapes.tickets_table("base")
    shapes.insert("base", rows(range(1, 5)))
    shapes.view("src", "SELECT * FROM base WHERE body NOT LIKE '%spam%'")
    settings = s.settings(db_engine)
    s.run(settings, "run-1", W)
    with writing(db_engine) as conn:
        conn.execute(sa.text("UPDATE base SET body = 'spam spam' WHERE ticket_id = 3"))

    assert s.run(settings, "run-2", W_AFTER)["retracted"] == 1
    assert sorted(s.results(db_engine)) == ["1", "2", "4"]


# --- invisible text --------------------------------------------------------------------------------------------

INVISIBLE = [
    ("\u200b\u200b", "\u200b"),  # zero-width spaces
    ("\ufeff", "\ufeff \ufeff"),  # BOMs
    (None, "\u00ad\u00ad\u00ad"),  # soft hyphens
    ("\u2060", "\u2060\u2060\n"),  # word joiners
    ("\u200c\u200d", "\u200e\u200f\u202a\u202c"),  # joiners, bidi marks and embeddings
    ("\u3164", "\ufe0f\u034f\u2800"),  # a Hangul filler, a variation selector, a grapheme joiner, braille blank
]


def test_invisible_only_tickets_are_empty_and_never_reach_the_model(db_engine, shapes):
    shapes.tickets_table()
    visible = rows([1, 2, 3])
    shapes.insert("src", [*visible, *[ticket(10 + k, sub, body, AT) for k, (sub, body) in enumerate(INVISIBLE)]])
    settings = s.settings(db_engine)  # six of nine empty: far above INFERENCE_MAX_FAILURE_RATE if they failed
    seen: list[list[str]] = []

    class Spy(StandInEncoder):
        def tokenize_with_offsets(self, texts):
            seen.append(list(texts))
            return super().tokenize_with_offsets(texts)

    summary = s.run(settings, "run-1", W, model=s.predictor(settings, Spy()))

    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", 3, 0)
    assert (summary["skipped"], summary["reasons"]) == (6, {"empty_input": 6})
    assert sorted(t for call in seen for t in call) == sorted(f"{a}\n{b}" for a, b in (text(k) for k in range(3)))
    assert sorted(s.results(db_engine)) == ["1", "2", "3"]


# --- scrambled outputs, staged rows without an item -----------------------------------------------------------


def test_scrambled_engine_outputs_fail_the_chunk_loudly_and_write_nothing(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows(range(1, 9)))
    settings = s.settings(db_engine)

    def unsort(batch_ids, output):  # an un-sort bug: each batch's rows come back in reverse order
        if len(batch_ids) > 1:
            output.embeddings[:] = output.embeddings[::-1].copy()

    shards = plan_run(settings, "run-1", W)
    with pytest.raises(OutputsScrambled) as failed:
        infer_shard(
            settings, "run-1", shards[0].shard, predictor=s.predictor(settings, StandInEncoder(on_forward=unsort))
        )

    assert "self-check failed" in str(failed.value) and "not written" in str(failed.value)
    with db_engine.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_staging)) == 0
    load_results(settings, "run-1")
    assert s.results(db_engine) == {}
    # the same shard with a sound engine: resumes and converges
    for shard in shards:
        infer_shard(settings, "run-1", shard.shard, predictor=s.predictor(settings))
    load_results(settings, "run-1")
    assert finish_run(settings, "run-1")["succeeded"] == 8


def test_a_staged_row_without_a_run_item_fails_reconciliation_and_is_never_written(db_engine, shapes):
    shapes.tickets_table()
    shapes.insert("src", rows([1, 2, 3]))
    settings = s.settings(db_engine)
    shards = plan_run(settings, "run-1", W)
    for shard in shards:
        infer_shard(settings, "run-1", shard.shard, predictor=s.predictor(settings))
    with writing(db_engine) as conn:  # a row of ticket 3 staged again under a ticket this run never planned
        row = dict(
            conn.execute(sa.select(inference_staging).where(inference_staging.c.ticket_id == "3")).one()._mapping
        )
        stray = StagedResult.from_row({**row, "ticket_id": "999"}, ("embedding", "embedding_dim"))
        staging.stage(conn, [stray])
    shapes.insert("src", [ticket(999, "Stray", "a ticket that exists but was not planned", AT - dt.timedelta(days=9))])

    load_results(settings, "run-1")

    assert "999" not in s.results(db_engine)
    with pytest.raises(Exception) as failed:
        finish_run(settings, "run-1")
    assert "1 staged results have no run item" in str(failed.value)
    assert sorted(s.results(db_engine)) == ["1", "2", "3"]


def test_the_self_check_costs_a_few_single_item_passes_per_chunk():
    """Cheap: SELF_CHECK_ITEMS extra forward passes of one item per chunk, none for a chunk of one."""
    from inference.config import Settings
    from inference.predictor import SELF_CHECK_ITEMS, build_predictor
    from inference.records import TicketInput

    settings = Settings(device="cpu", heads=("embedding",), cache_dir="", model_version="x")
    encoder = StandInEncoder()
    predictor = build_predictor(settings, encoder, "x")
    inputs = {str(k): TicketInput(str(k), AT, "h" * 64, " ".join(text(k)), False) for k in range(50)}
    before = encoder.forward_calls
    out = predictor.compute("r", list(inputs), inputs)
    assert len(out.staged) == 50
    assert encoder.forward_calls - before == 1 + SELF_CHECK_ITEMS
    one = {"0": inputs["0"]}
    before = encoder.forward_calls
    predictor.compute("r", ["0"], one)
    assert encoder.forward_calls - before == 1
