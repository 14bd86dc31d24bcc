"""The real DAG (dag.test, the real model) on a help desk's own table, not the demo's: a schema of its own, names as a
CSV import keeps its headers (spaces, a dash, parentheses, an umlaut), text IDs as agents write them, no subject
column, one timestamp column holding RFC 2822 text and Unix times written as digits, bodies that are plain text, an
HTML reply, the raw e-mail message of a reply and nothing visible, and a ticket imported twice. Then an operator
reprocesses one ticket by its ID from the trigger form's params."""

from __future__ import annotations

import datetime as dt
import email.utils
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.bench.html_mail import as_html_mail, as_mime_mail
from inference.store.db import writing
from inference.store.schema import inference_run_items, inference_runs, ticket_results
from inference.textprep import content_hash
from inference.window import window_for_date

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)
AT = WINDOW.start + dt.timedelta(hours=5)

BILLING = "I was charged twice for my plan this month, please refund one of the two payments."
SHIPPING = "My parcel has not arrived yet and the tracking number shows no updates for a week."
ACCESS = "I cannot log in to my account: the password reset email never arrives."
FEATURE = "It would be great if you could add a dark mode to the dashboard."


def rfc2822(at: dt.datetime) -> str:
    return email.utils.format_datetime(at.astimezone(dt.timezone(dt.timedelta(hours=-5))))


def unix_digits(at: dt.datetime) -> str:
    return str(int(at.timestamp() * 1000))  # milliseconds, as a JSON API leaves them


ROWS = [  # (id, message, received)
    ("SUP-1", BILLING, rfc2822(AT)),
    ("SUP-2", as_html_mail(SHIPPING, BILLING, "gmail"), rfc2822(AT + dt.timedelta(minutes=5))),
    ("工单-3", as_mime_mail(ACCESS, FEATURE, "outlook", None, 1), unix_digits(AT + dt.timedelta(minutes=7))),
    ("EU/2026/4", "\u200b\u200b \ufeff", rfc2822(AT)),  # nothing visible
    ("SUP-5", "Please cancel my subscration", rfc2822(AT)),  # imported twice: the newer version wins
    ("SUP-5", "Please cancel my subscription and stop the automatic renewal.", rfc2822(AT + dt.timedelta(hours=1))),
    ("#6", FEATURE, rfc2822(WINDOW.start - dt.timedelta(hours=1))),  # the night before: not this window
]
EXPECTED = {"SUP-1": "billing", "SUP-2": "shipping", "工单-3": "account_access", "SUP-5": "cancellation"}


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")


@pytest.fixture
def helpdesk(pg_engine, monkeypatch):
    with writing(pg_engine) as conn:
        conn.exec_driver_sql('CREATE SCHEMA "Help-Desk"')
        conn.exec_driver_sql(
            'CREATE TABLE "Help-Desk"."Requests (export)" ("Ticket ID" TEXT, "Übermittelter Text" TEXT, "Received at" TEXT)'
        )
        conn.execute(
            sa.text('INSERT INTO "Help-Desk"."Requests (export)" VALUES (:i, :m, :r)'),
            [dict(i=i, m=m, r=r) for i, m, r in ROWS],
        )
    url = pg_engine.url
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}")
    for name, value in {
        "TICKETS_SOURCE_SCHEMA": "Help-Desk",
        "TICKETS_SOURCE_TABLE": "Requests (export)",
        "TICKETS_COL_ID": "Ticket ID",
        "TICKETS_COL_SUBJECT": "none",
        "TICKETS_COL_BODY": "Übermittelter Text",
        "TICKETS_COL_CREATED_AT": "Received at",
        "TICKETS_COL_UPDATED_AT": "Received at",
        "INFERENCE_DEVICE": "cpu",
        "INFERENCE_CHUNK_SIZE": "2",
    }.items():
        monkeypatch.setenv(name, value)
    yield pg_engine
    with writing(pg_engine) as conn:
        conn.exec_driver_sql('DROP SCHEMA "Help-Desk" CASCADE')


def items_of(engine, run_id: str) -> dict[str, tuple[str, str | None]]:
    i = inference_run_items.c
    with engine.connect() as conn:
        rows = conn.execute(sa.select(i.ticket_id, i.status, i.reason).where(i.run_id == run_id))
        return {r.ticket_id: (r.status, r.reason) for r in rows}


def test_a_help_desks_own_table_through_the_dag_then_one_ticket_again_by_its_id(dag, helpdesk):
    nightly = dag.test(logical_date=WINDOW.end)

    assert nightly.state == "success"
    assert items_of(helpdesk, nightly.run_id) == {
        **{ticket_id: ("succeeded", None) for ticket_id in EXPECTED},
        "EU/2026/4": ("skipped", "empty_input"),
    }
    with helpdesk.connect() as conn:
        run = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == nightly.run_id)).one()
        results = {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}
    assert (run.backlog, run.succeeded, run.skipped, run.source_duplicates) == (5, 4, 1, 1)
    newest = {i: m for i, m, _ in ROWS}  # the later row of SUP-5
    assert {k: r.content_hash for k, r in results.items()} == {k: content_hash(None, newest[k]) for k in EXPECTED}
    assert {k: r.category for k, r in results.items()} == EXPECTED
    for ticket_id in ("SUP-2", "工单-3"):  # the customer's own words, never markup, encodings or the quote
        summary = results[ticket_id].summary
        assert summary and not any(mark in summary for mark in ("<", "&", "=2", "Content-", "dark mode", "charged"))

    again = dag.test(logical_date=WINDOW.end + dt.timedelta(days=1), run_conf={"ticket_ids": ["工单-3", "SUP-404"]})

    assert again.state == "success"
    assert items_of(helpdesk, again.run_id) == {"工单-3": ("succeeded", None)}
    with helpdesk.connect() as conn:
        after = {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}
    # recomputed to the same output: the stored result stays as it was (a rerun changes nothing), one per ticket
    assert after.keys() == results.keys() and after["工单-3"] == results["工单-3"]
