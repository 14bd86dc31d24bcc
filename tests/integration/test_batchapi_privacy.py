"""Ticket text leaves only in the request files, and those only to the provider: a canary text must not
appear in any log record (every logger at DEBUG, the SDK's and the HTTP library's included), error,
table row or trigger event, and no request file may be left on disk."""

from __future__ import annotations

import logging
import tempfile

import pytest
import sqlalchemy as sa

from inference.batchapi import BatchApiUnavailable, collect_run, submit_run
from inference.store.batch_tables import inference_batch_requests, inference_batches
from inference.store.schema import inference_run_items, inference_staging, ticket_failures, ticket_results
from tests.support.batch_night import RUN, local_client, night, setup_run
from tests.support.openai_server import Behaviour, OpenAIServer
from tests.support.tickets import W2, add_ticket

CANARY_SUBJECT = "Canary-subject-7Q2Z"
CANARY_BODY = "canary body text 9XK4 with an IBAN DE89370400440532013000"


def test_no_ticket_text_in_logs_errors_tables_or_temporary_files(sqlite_engine, tmp_path, monkeypatch, caplog):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("OPENAI_LOG", "debug")
    caplog.set_level(logging.DEBUG)
    add_ticket(sqlite_engine, 500, CANARY_SUBJECT, CANARY_BODY, W2.start)
    errors: list[str] = []
    with OpenAIServer() as server:
        server.behaviour = Behaviour(fail={"500"}, polls=2)
        settings, ctx, _ = setup_run(sqlite_engine, 3, max_failure_rate=1.0)
        client = local_client(server)
        submit_run(ctx, client, RUN)
        sent = b"".join(server.contents[b["input_file_id"]] for b in server.batches.values())
        assert CANARY_SUBJECT.encode() in sent  # the text did go out, in the request file only
        server.faults.cut_downloads = 10
        with pytest.raises(BatchApiUnavailable) as cut:
            while not collect_run(ctx, client, RUN).done:
                pass
        errors.append(str(cut.value))
        server.faults.cut_downloads = 0
        server.behaviour = Behaviour()
        night(settings, ctx, client)
        client.close()

    assert server.files == {}  # the provider was asked to delete every file
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    assert len(caplog.records) > 20  # the SDK and HTTP debug logs were on
    tables = []
    with sqlite_engine.connect() as conn:
        for table in (
            inference_batches,
            inference_batch_requests,
            ticket_failures,
            inference_run_items,
            inference_staging,
        ):
            tables.append(repr(list(conn.execute(sa.select(table)))))
        tables.append(repr(list(conn.execute(sa.select(ticket_results.c.summary)))))
    for text in (CANARY_SUBJECT, CANARY_BODY, "9XK4", "DE89370400440532013000"):
        assert text not in logged and text not in "".join(errors) and text not in "".join(tables)
    assert list(scratch.iterdir()) == []  # request and result files removed
