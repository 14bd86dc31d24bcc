"""Overlap on a real PostgreSQL: two copies of one mapped infer_shard at once, and a backfill running at the
same time as the nightly run over the same day. Both must end as one run alone would: no unique violation,
no deadlock, one result per ticket, equal to a run without overlap."""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import pytest
import sqlalchemy as sa

from inference.engine.encoder import Encoder
from inference.heads.embedding import embedding_from_bytes
from inference.options import RunOptions
from inference.pipeline import finish_run, infer_shard, load_results, plan_run, run_window
from inference.store.schema import tickets
from inference.window import window_for_date

DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)


def assert_same_results(got: dict, want: dict, run_ids: set[str]) -> None:
    """Ticket by ticket; embeddings to float tolerance (batch composition changes the last bits)."""
    assert sorted(got) == sorted(want)
    for ticket_id, w in want.items():
        g = got[ticket_id]
        assert g["run_id"] in run_ids
        for key in ("content_hash", "source_updated_at", "model_id", "model_version", "category", "truncated"):
            assert g[key] == w[key], (ticket_id, key)
        assert g["input_tokens"] == w["input_tokens"]
        assert g["category_score"] == pytest.approx(w["category_score"], abs=1e-4)
        np.testing.assert_allclose(
            embedding_from_bytes(g["embedding"]), embedding_from_bytes(w["embedding"]), atol=1e-5
        )


def test_two_copies_of_one_shard_at_once_end_as_one(pg_settings, add_tickets, model, view, together):
    n = 60
    settings = pg_settings(chunk_size=10)
    ids = add_tickets(n)
    plan_run(settings, "single", WINDOW)
    infer_shard(settings, "single", 0, predictor=model)
    load_results(settings, "single")
    finish_run(settings, "single")
    reference = view.results()
    view.forget_results()

    assert [s.tickets for s in plan_run(settings, "double", WINDOW)] == [n]
    first, second = together(
        lambda: infer_shard(settings, "double", 0, predictor=model),
        lambda: infer_shard(settings, "double", 0, predictor=model),
    )

    items = view.items("double")
    assert {status for status, _, _ in items.values()} == {"staged"}
    assert max(attempts for _, _, attempts in items.values()) == 2, "the copies really overlapped"
    assert first.staged + second.staged >= n and first.failed == second.failed == 0
    assert sorted(view.staging("double")) == sorted(ids)  # keyed by (run, ticket): no duplicate outputs
    load_results(settings, "double")
    summary = finish_run(settings, "double")
    assert (summary["status"], summary["succeeded"], summary["failed"], summary["skipped"]) == ("succeeded", n, 0, 0)
    assert view.failures() == []
    assert_same_results(view.results(), reference, {"double"})


def test_a_backfill_overlapping_the_nightly_run_at_the_same_time(
    pg_settings, add_tickets, model, view, together, pg_engine
):
    n = 50
    settings = pg_settings(chunk_size=10)
    ids = add_tickets(n, days=(DAY - dt.timedelta(days=1), DAY))
    backfill = RunOptions(window_start=DAY - dt.timedelta(days=1), window_end=DAY)
    t = tickets.c
    in_day = sa.or_(
        sa.and_(t.created_at >= WINDOW.start, t.created_at < WINDOW.end),
        sa.and_(t.updated_at >= WINDOW.start, t.updated_at < WINDOW.end),
    )
    with pg_engine.connect() as conn:
        day_ids = {str(x) for x in conn.scalars(sa.select(t.ticket_id).where(in_day))}
    assert 0 < len(day_ids) < n

    alone = run_window(settings, "backfill-alone", WINDOW, backfill, predictor=model)
    assert (alone["status"], alone["succeeded"]) == ("succeeded", n)
    reference = view.results()
    view.forget_results()

    nightly, backfilled = together(
        lambda: run_window(settings, "nightly", WINDOW, predictor=model),
        lambda: run_window(settings, "backfill", WINDOW, backfill, predictor=model),
    )

    assert nightly["status"] == backfilled["status"] == "succeeded"
    assert nightly["failed"] == backfilled["failed"] == 0
    assert (nightly["backlog"], backfilled["backlog"]) == (len(day_ids), n), "both planned the shared day"
    assert nightly["succeeded"] == len(day_ids) and backfilled["succeeded"] == n
    results, source = view.results(), view.source_hashes()
    assert sorted(results) == sorted(ids)
    assert {tid: r["content_hash"] for tid, r in results.items()} == {tid: source[tid] for tid in ids}
    assert {results[tid]["run_id"] for tid in set(ids) - day_ids} == {"backfill"}
    assert_same_results(results, reference, {"nightly", "backfill"})
    assert view.failures() == []
    assert view.staging("nightly") == view.staging("backfill") == {}


def test_a_late_copy_of_the_shard_cannot_undo_a_finished_load(pg_settings, add_tickets, model, view, monkeypatch):
    n, chunk = 30, 10
    settings = pg_settings(chunk_size=chunk)
    ids = add_tickets(n)
    plan_run(settings, "run-late", WINDOW)
    in_model, release = threading.Event(), threading.Event()
    real_forward = Encoder.forward

    def forward(self, batch_ids, *args, **kwargs):
        if threading.current_thread().name == "late-copy":  # this copy stalls in the model (a slow or stuck device)
            in_model.set()
            assert release.wait(60)
        return real_forward(self, batch_ids, *args, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)
    late: dict = {}

    def late_copy() -> None:
        try:
            late["totals"] = infer_shard(settings, "run-late", 0, predictor=model)
        except BaseException as exc:  # noqa: BLE001 - checked below
            late["error"] = exc

    thread = threading.Thread(target=late_copy, name="late-copy")
    thread.start()
    try:
        assert in_model.wait(60), "the late copy never reached the model"
        infer_shard(settings, "run-late", 0, predictor=model)  # the other copy does the whole shard...
        load_results(settings, "run-late")  # ...and the DAG moves on
        assert set(view.statuses("run-late").values()) == {"succeeded"}
    finally:
        release.set()
        thread.join(60)
    assert "error" not in late, late.get("error")

    summary = finish_run(settings, "run-late")
    assert (summary["status"], summary["succeeded"]) == ("succeeded", n)
    assert set(view.statuses("run-late").values()) == {"succeeded"}
    assert view.staging("run-late") == {}
    assert sorted(view.results()) == sorted(ids)
