"""Data races: a ticket edited while a run is in flight, a concurrent writer, a model change mid-run."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import sqlalchemy as sa

from inference.errors import ModelChanged
from inference.pipeline import (
    finish_run,
    has_retries,
    infer_shard,
    load_results,
    plan_run,
    retry_failed,
    run_window,
)
from inference.store.db import writing
from inference.store.schema import inference_staging, tickets
from inference.store.source import Source
from inference.textprep import content_hash
from tests.support.tables import count, failures, items, results
from tests.support.tickets import W2, add_ticket, edit_ticket, settings_for

CREATED = W2.start + dt.timedelta(hours=1)
EDITED = W2.start + dt.timedelta(hours=9)
OLD_BODY = "The app crashes when I open the settings page."
NEW_BODY = "Please cancel my subscription and refund the last payment."


@pytest.fixture
def four_tickets(db_engine):
    for ticket_id in range(1, 5):
        add_ticket(
            db_engine, ticket_id, f"Ticket {ticket_id}", OLD_BODY if ticket_id == 2 else f"Body {ticket_id}", CREATED
        )
    return db_engine


def _plan_and_infer(settings, run_id, model) -> None:
    for shard in plan_run(settings, run_id, W2):
        infer_shard(settings, run_id, shard.shard, predictor=model)


def test_a_ticket_edited_between_infer_and_load_is_not_written_then_retried_with_the_new_text(
    four_tickets, model, encoded
):
    engine, settings = four_tickets, settings_for(four_tickets)
    _plan_and_infer(settings, "run-1", model)
    assert count(engine, inference_staging) == 4
    edit_ticket(engine, 2, NEW_BODY, EDITED)

    load_results(settings, "run-1")

    assert "2" not in results(engine)  # the output computed from the old text was not written
    assert set(results(engine)) == {"1", "3", "4"}
    item = items(engine, "run-1")["2"]
    assert (item.status, item.reason) == ("failed", "stale_input")
    [failure] = failures(engine)
    assert (failure.ticket_id, failure.error_class, failure.retryable, failure.status) == (
        "2",
        "stale_input",
        True,
        "pending",
    )
    assert OLD_BODY not in failure.message and NEW_BODY not in failure.message

    assert has_retries(settings, "run-1")
    retry_failed(settings, "run-1", predictor=model)

    stored = results(engine)["2"]
    assert stored.content_hash == content_hash("Ticket 2", NEW_BODY)
    assert stored.source_updated_at == EDITED and stored.run_id == "run-1"
    assert any(NEW_BODY in t for t in encoded.calls[-1])  # the retry read the new text
    summary = finish_run(settings, "run-1")
    assert (summary["status"], summary["succeeded"], summary["failed"], summary["skipped"]) == ("succeeded", 4, 0, 0)
    assert [f.status for f in failures(engine)] == ["resolved"]


def test_an_older_staged_version_never_overwrites_a_newer_result(four_tickets, model, monkeypatch):
    """Run A staged ticket 2's old text. Between A's staleness check (the source versions it reads) and
    A's upsert, the ticket is edited and run B writes the newer result. Only the upsert guard stands
    between A's older output and B's newer result."""
    engine, settings = four_tickets, settings_for(four_tickets)
    _plan_and_infer(settings, "run-A", model)

    real_versions = Source.versions
    interleaved = []

    def versions(self, conn, ticket_ids, as_read=None):
        ticket_ids = list(ticket_ids)
        answer = real_versions(self, conn, ticket_ids, as_read)
        if "2" in ticket_ids and not interleaved:
            interleaved.append(True)
            edit_ticket(engine, 2, NEW_BODY, EDITED)
            run_window(settings, "run-B", W2, predictor=model)  # a concurrent run (backfill, manual trigger)
            assert results(engine)["2"].content_hash == content_hash("Ticket 2", NEW_BODY)
        return answer  # what A saw before B committed

    monkeypatch.setattr(Source, "versions", versions)
    load_results(settings, "run-A")

    assert interleaved
    stored = results(engine)["2"]
    assert (stored.content_hash, stored.source_updated_at, stored.run_id) == (
        content_hash("Ticket 2", NEW_BODY),
        EDITED,
        "run-B",
    )
    item = items(engine, "run-A")["2"]
    assert (item.status, item.reason) == ("skipped", "superseded")
    assert finish_run(settings, "run-A")["status"] == "succeeded"


def test_a_model_version_change_mid_run_raises_and_writes_nothing(four_tickets, model):
    engine = four_tickets
    planned = settings_for(engine, model_version="minilm@plan-v1")
    changed = settings_for(engine, model_version="minilm@deploy-v2")
    shards = plan_run(planned, "run-1", W2)
    assert shards

    with pytest.raises(ModelChanged, match="minilm@plan-v1"):  # the worker was handed the new model
        infer_shard(changed, "run-1", shards[0].shard, predictor=dataclasses.replace(model, version="minilm@deploy-v2"))
    with pytest.raises(ModelChanged):  # the worker would load the new model itself
        infer_shard(changed, "run-1", shards[0].shard)
    with pytest.raises(ModelChanged):
        retry_failed(changed, "run-1", predictor=dataclasses.replace(model, version="minilm@deploy-v2"))

    assert count(engine, inference_staging) == 0
    assert results(engine) == {} and failures(engine) == []
    assert {(i.status, i.attempts) for i in items(engine, "run-1").values()} == {("planned", 0)}


def test_a_ticket_emptied_after_its_result_does_not_keep_a_stale_result(db_engine, model):
    settings = settings_for(db_engine)
    add_ticket(db_engine, 1, "Refund", "I was charged twice.", CREATED)
    add_ticket(db_engine, 2, "Login", "I cannot sign in.", CREATED)
    run_window(settings, "run-1", W2, predictor=model)
    assert set(results(db_engine)) == {"1", "2"}
    with writing(db_engine) as conn:
        conn.execute(
            sa.update(tickets).where(tickets.c.ticket_id == 1).values(subject=None, body="  ", updated_at=EDITED)
        )

    summary = run_window(settings, "run-2", W2, predictor=model)

    assert (summary["status"], summary["reasons"]) == ("succeeded", {"empty_input": 1})
    assert (items(db_engine, "run-2")["1"].status, items(db_engine, "run-2")["1"].reason) == ("skipped", "empty_input")
    stale = results(db_engine).get("1")
    assert stale is None or stale.content_hash == content_hash(None, "  "), "a result for text that no longer exists"
