"""The whole pipeline (plan -> infer -> load -> retry -> finish) on both dialects, with the real model."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pytest
import sqlalchemy as sa

from inference.config import Settings
from inference.engine.encoder import Encoder
from inference.errors import RunFailed
from inference.heads.embedding import embedding_from_bytes
from inference.pipeline import RunOptions, finish_run, load_results, plan_run, run_window
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import inference_run_items, ticket_failures, ticket_results, tickets
from inference.textprep import content_hash
from inference.window import window_for_date
from tests.support.poison import POISON

DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)
N = 120


@pytest.fixture
def settings(db_engine) -> Settings:
    url = db_engine.url.render_as_string(hide_password=False)
    return Settings(db_url=url, device="cpu", chunk_size=32, shard_tokens=2_000, max_shards=3)


@pytest.fixture
def backlog(db_engine):
    """N seeded tickets in the window, one empty and one whitespace-only, and one outside the window."""
    seed_backlog(db_engine, N, [WINDOW], seed=11)
    inside = WINDOW.start + dt.timedelta(hours=2)
    extra = [
        dict(ticket_id=9001, subject=None, body=None, created_at=inside, updated_at=inside),
        dict(ticket_id=9002, subject=" ", body="\n\t ", created_at=inside, updated_at=inside),
        dict(
            ticket_id=9003,
            subject="old",
            body="outside the window",
            created_at=WINDOW.start - dt.timedelta(days=2),
            updated_at=WINDOW.start - dt.timedelta(days=2),
        ),
    ]
    with writing(db_engine) as conn:
        conn.execute(sa.insert(tickets), extra)
    return db_engine


def results(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def source_rows(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}


def test_every_ticket_of_the_window_ends_in_exactly_one_state(backlog, settings, model):
    summary = run_window(settings, "run-1", WINDOW, predictor=model)

    assert summary["status"] == "succeeded"
    assert summary["backlog"] == N + 2
    assert summary["succeeded"] + summary["failed"] + summary["skipped"] == summary["backlog"]
    assert (summary["skipped"], summary["reasons"]) == (2, {"empty_input": 2})
    assert summary["shards"] >= 2  # small shard_tokens: the backlog was split
    stored, source = results(backlog), source_rows(backlog)
    assert len(stored) == summary["succeeded"] == N
    assert "9003" not in stored and "9001" not in stored
    for ticket_id, r in stored.items():  # row by row, matched by ID
        s = source[ticket_id]
        assert r.content_hash == content_hash(s.subject, s.body)
        assert r.source_updated_at == s.updated_at
        assert r.run_id == "run-1"
        vec = embedding_from_bytes(r.embedding)
        assert vec.shape == (384,) and abs(np.linalg.norm(vec) - 1) < 1e-3
        assert r.category in {
            "billing",
            "account_access",
            "technical_issue",
            "feature_request",
            "shipping",
            "cancellation",
        }
    with backlog.connect() as conn:
        states = dict(conn.execute(sa.select(inference_run_items.c.ticket_id, inference_run_items.c.status)).all())
    assert states["9001"] == states["9002"] == "skipped"
    assert sum(1 for v in states.values() if v == "succeeded") == N


def test_rerun_changes_nothing_and_an_edit_reprocesses_exactly_that_ticket(backlog, settings, model):
    run_window(settings, "run-1", WINDOW, predictor=model)
    before = results(backlog)

    again = run_window(settings, "run-2", WINDOW, predictor=model)
    assert (again["succeeded"], again["failed"], again["skipped"]) == (0, 0, 2)
    assert results(backlog) == before

    edited_at = WINDOW.start + dt.timedelta(hours=5)
    with writing(backlog) as conn:
        conn.execute(
            sa.update(tickets)
            .where(tickets.c.ticket_id == 7)
            .values(body="I was charged twice, please refund me.", updated_at=edited_at)
        )
    third = run_window(settings, "run-3", WINDOW, predictor=model)
    assert third["succeeded"] == 1
    after = results(backlog)
    changed = {t for t in after if after[t] != before[t]}
    assert changed == {"7"}
    assert after["7"].run_id == "run-3" and after["7"].source_updated_at == edited_at


def test_a_new_model_version_reprocesses_the_window(backlog, settings, model):
    run_window(settings, "run-1", WINDOW, predictor=model)
    newer = dataclasses.replace(settings, model_version="minilm@test-2")
    summary = run_window(newer, "run-2", WINDOW, predictor=dataclasses.replace(model, version="minilm@test-2"))
    assert summary["succeeded"] == N
    assert {r.model_version for r in results(backlog).values()} == {"minilm@test-2"}


@pytest.fixture
def poisoned(monkeypatch, model):
    """Fault injection in the model call: any forward pass whose batch holds the poison token raises."""
    poison_id = model.encoder.tokenize([POISON])[0][0][1]
    real_forward = Encoder.forward

    def forward(self, batch_ids, width, **kwargs):
        if any(poison_id in seq for seq in batch_ids):
            raise RuntimeError("injected model fault")
        return real_forward(self, batch_ids, width, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)


def test_a_poison_ticket_is_isolated_retried_and_dead_lettered(backlog, settings, model, poisoned):
    with writing(backlog) as conn:
        conn.execute(
            sa.update(tickets).where(tickets.c.ticket_id == 3).values(body=f"My {POISON} order never shipped.")
        )

    summary = run_window(settings, "run-1", WINDOW, predictor=model)

    assert summary["status"] == "succeeded"  # 1 of 122 is below the default 5% threshold
    assert (summary["succeeded"], summary["failed"]) == (N - 1, 1)
    assert summary["reasons"]["model_error"] == 1
    assert "3" not in results(backlog)
    with backlog.connect() as conn:
        failure = conn.execute(sa.select(ticket_failures)).one()
    assert (failure.ticket_id, failure.error_class, failure.status, failure.attempt) == (
        "3",
        "model_error",
        "dead_letter",
        settings.max_attempts,
    )
    assert POISON not in failure.message and "shipped" not in failure.message

    # A dead-lettered ticket is not retried every night while its text is unchanged...
    assert run_window(settings, "run-2", WINDOW, predictor=model)["backlog"] == 2  # only the two empty ones
    # ...and is picked up again once it is edited.
    with writing(backlog) as conn:
        conn.execute(
            sa.update(tickets)
            .where(tickets.c.ticket_id == 3)
            .values(body="My order never shipped.", updated_at=WINDOW.start + dt.timedelta(hours=6))
        )
    third = run_window(settings, "run-3", WINDOW, predictor=model)
    assert (third["succeeded"], third["failed"]) == (1, 0)
    with backlog.connect() as conn:
        assert conn.execute(sa.select(ticket_failures.c.status)).scalar_one() == "resolved"


def test_failure_rate_above_threshold_fails_the_run(backlog, settings, model, poisoned):
    with writing(backlog) as conn:
        conn.execute(sa.update(tickets).where(tickets.c.ticket_id.in_([3, 4])).values(body=f"{POISON} case"))
    strict = dataclasses.replace(settings, max_failure_rate=0.01)
    with pytest.raises(RunFailed, match="failure rate") as raised:
        run_window(strict, "run-1", WINDOW, predictor=model)
    assert raised.value.summary["failed"] == 2
    assert POISON not in str(raised.value) and POISON not in repr(raised.value.summary)


def test_unfinished_items_fail_reconciliation_loudly(backlog, settings):
    plan_run(settings, "run-1", WINDOW, RunOptions())
    load_results(settings, "run-1")  # as if every infer_shard task had died
    with pytest.raises(RunFailed, match=f"reconciliation failed: {N} of {N + 2} tickets have no final state"):
        finish_run(settings, "run-1")


def test_planning_again_replaces_the_previous_plan(backlog, settings):
    first = plan_run(settings, "run-1", WINDOW, RunOptions(shards=2))
    second = plan_run(settings, "run-1", WINDOW, RunOptions(shards=3, limit=50))
    assert sum(s.tickets for s in first) == N
    assert sum(s.tickets for s in second) <= 50 and len(second) == 3
    with backlog.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_run_items)) == 50
