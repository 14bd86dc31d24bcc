"""The Batch API backend end to end: the real `openai` SDK against a local provider on 127.0.0.1
(tests/support/openai_server.py), the real run tables, plan_run / load_results / finish_run of the
pipeline, on SQLite and PostgreSQL. Every summary is checked against the ticket it belongs to."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from inference.batchapi import collect_run, submit_run
from inference.batchapi.cost import run_cost
from inference.pipeline import finish_run, load_results
from inference.store.batch_tables import inference_batch_requests, inference_batches
from inference.textprep import content_hash
from tests.support.batch_night import (
    RUN,
    expected_summary,
    failures_of,
    item_states,
    local_client,
    night,
    setup_run,
    stored,
)
from tests.support.openai_server import Behaviour, OpenAIServer
from tests.support.tickets import W2, edit_ticket


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = local_client(server)
    yield c
    c.close()


def test_a_night_of_summaries_lands_on_the_right_tickets_with_its_cost(db_engine, server, client):
    server.behaviour = Behaviour(polls=3, shuffle=True)
    settings, ctx, texts = setup_run(
        db_engine, 23, max_requests=10, price_input_per_mtok=0.075, price_output_per_mtok=0.3
    )

    drive = night(settings, ctx, client)
    summary = finish_run(settings, RUN)

    assert summary["status"] == "succeeded" and summary["succeeded"] == 23
    assert drive.rounds == 1 and sorted(drive.parts) == [0, 1, 2]  # 23 requests, 10 per file
    assert server.creates == 3
    results = stored(db_engine)
    for ticket_id, (subject, body) in texts.items():  # matched by ID, never by position
        r = results[ticket_id]
        assert r.summary == expected_summary(subject, body)
        assert r.content_hash == content_hash(subject, body)
    with db_engine.connect() as conn:
        cost = run_cost(conn, RUN, ctx.settings)
        parts = list(conn.execute(sa.select(inference_batches).order_by(inference_batches.c.part)))
    assert [p.request_count for p in parts] == [10, 10, 3]
    assert all(p.state == "collected" and p.provider_status == "completed" for p in parts)
    assert cost.tickets_replied == 23 and cost.input_tokens > 0 and cost.output_tokens == 23 * 7
    expected = (cost.input_tokens * 0.075 + cost.output_tokens * 0.3) / 1e6
    assert cost.cost_usd == pytest.approx(expected, abs=1e-6)
    assert cost.cost_per_1000_tickets_usd == pytest.approx(expected / 23 * 1000, abs=1e-6)
    # The provider keeps nothing of ours once collected: input, output and error files deleted.
    assert server.files == {}


def test_partial_failures_are_retried_in_a_smaller_batch_and_dead_lettered_after_the_attempts(
    sqlite_engine, server, client
):
    server.behaviour = Behaviour(
        fail={"3"}, drop={"5"}, duplicate={"7"}, contradict={"8"}, malformed_lines=2, foreign_lines=2
    )
    settings, ctx, texts = setup_run(sqlite_engine, 12, max_failure_rate=0.1, retry_max_requests=2)

    submit_run(ctx, client, RUN)
    while not collect_run(ctx, client, RUN).done:
        pass
    load_results(settings, RUN)

    states = item_states(sqlite_engine)
    assert states["3"] == ("failed", "batch_request_error")
    assert states["5"] == ("failed", "batch_missing")
    assert states["8"] == ("failed", "invalid_output")  # two different answers: neither is written
    assert states["7"] == ("succeeded", None)  # the same line twice: written once
    assert {t for t, (st, _) in states.items() if st == "succeeded"} == set(texts) - {"3", "5", "8"}
    assert "3" not in stored(sqlite_engine) and "8" not in stored(sqlite_engine)

    # The retry round: only the three failures go out again, in parts of at most retry_max_requests,
    # and the provider now misbehaves only for ticket 3 (it keeps failing: dead-lettered at attempt 3).
    server.behaviour = Behaviour(fail={"3"})
    drive = night(settings, ctx, client)
    summary = finish_run(settings, RUN)

    assert drive.rounds == 2
    with sqlite_engine.connect() as conn:
        retry_parts = list(conn.execute(sa.select(inference_batches).where(inference_batches.c.retry_round > 0)))
    assert retry_parts and max(p.request_count for p in retry_parts) <= 2
    assert sum(p.request_count for p in retry_parts if p.retry_round == 1) == 3
    assert summary["succeeded"] == 11 and summary["failed"] == 1
    dead = failures_of(sqlite_engine)["3"]
    assert (dead.status, dead.attempt, dead.error_class) == ("dead_letter", 3, "batch_request_error")
    assert dead.message == "the provider answered HTTP 400, code context_length_exceeded"  # its code, never its text
    results = stored(sqlite_engine)
    for ticket_id in ("5", "8"):
        assert results[ticket_id].summary == expected_summary(*texts[ticket_id])


def test_an_expired_batch_keeps_what_finished_and_retries_the_rest(sqlite_engine, server, client):
    server.behaviour = Behaviour(expire_after=4, shuffle=False)
    settings, ctx, texts = setup_run(sqlite_engine, 10)

    submit_run(ctx, client, RUN)
    while not collect_run(ctx, client, RUN).done:
        pass
    load_results(settings, RUN)

    states = item_states(sqlite_engine)
    assert sorted(t for t, (st, _) in states.items() if st == "succeeded") == sorted(["1", "10", "2", "3"])
    assert {states[t] for t in ("4", "5", "6", "7", "8", "9")} == {("failed", "batch_expired")}
    server.behaviour = Behaviour()
    night(settings, ctx, client)
    assert finish_run(settings, RUN)["succeeded"] == 10


def test_a_ticket_edited_after_it_was_sent_never_gets_the_old_texts_summary(sqlite_engine, server, client):
    server.behaviour = Behaviour(polls=2)
    settings, ctx, texts = setup_run(sqlite_engine, 4)
    submit_run(ctx, client, RUN)
    edit_ticket(sqlite_engine, 2, "A completely new body.", W2.start + dt.timedelta(hours=5))
    while not collect_run(ctx, client, RUN).done:
        pass
    load_results(settings, RUN)

    assert item_states(sqlite_engine)["2"] == ("failed", "stale_input")
    assert "2" not in stored(sqlite_engine)
    night(settings, ctx, client)  # the retry round reads the new text
    assert stored(sqlite_engine)["2"].summary == expected_summary(texts["2"][0], "A completely new body.")
    assert finish_run(settings, RUN)["succeeded"] == 4


def test_a_failed_batch_validation_fails_its_requests_for_a_retry(sqlite_engine, server, client):
    server.behaviour = Behaviour(fail_validation=True)
    settings, ctx, _ = setup_run(sqlite_engine, 3)
    submit_run(ctx, client, RUN)
    while not collect_run(ctx, client, RUN).done:
        pass
    assert {v for v in item_states(sqlite_engine).values()} == {("failed", "batch_request_error")}
    server.behaviour = Behaviour()
    night(settings, ctx, client)
    assert finish_run(settings, RUN)["succeeded"] == 3


def test_request_rows_hold_ids_hashes_and_tokens_only(sqlite_engine, server, client):
    settings, ctx, texts = setup_run(sqlite_engine, 3)
    night(settings, ctx, client)
    with sqlite_engine.connect() as conn:
        rows = list(conn.execute(sa.select(inference_batch_requests)))
        parts = list(conn.execute(sa.select(inference_batches)))
    dumped = repr(rows) + repr(parts)
    for subject, body in texts.values():
        assert subject not in dumped and body not in dumped
    assert {r.outcome for r in rows} == {"result"}
