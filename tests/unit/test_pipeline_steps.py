"""The pipeline's logic with a deterministic stand-in encoder (injected, no torch, no model weights) on a
SQLite file: planning, chunked inference, failure isolation, the retry branch, loading and reconciliation.

The same steps run against the real model and the real PostgreSQL in tests/integration, tests/faults and
tests/reliability; these tests are the fast loop for changing the logic.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pytest
import sqlalchemy as sa

from inference.config import Settings
from inference.engine.standin import StandInEncoder
from inference.errors import ModelChanged, RunFailed
from inference.heads.embedding import embedding_from_bytes
from inference.options import RunOptions
from inference.pipeline import finish_run, has_retries, infer_shard, load_results, plan_run, retry_failed, run_window
from inference.predictor import build_predictor
from inference.records import FailureKind
from inference.store.db import make_engine, writing
from inference.store.schema import (
    create_schema,
    inference_run_items,
    inference_staging,
    ticket_failures,
    ticket_results,
    tickets,
)
from inference.textprep import content_hash, sentence_spans
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
AT = WINDOW.start + dt.timedelta(hours=3)
TEXTS = [
    ("Charged twice", "I was billed twice for my plan this month. Please refund the duplicate payment."),
    ("Cannot log in", "The password reset email never arrives. I checked my spam folder."),
    ("App crashes", "The desktop client crashes on startup with an error. It started after the update."),
    ("Dark mode please", "It would be great to have a dark mode. My eyes hurt at night."),
    ("Where is my parcel", "My order has not arrived and the tracking shows no updates."),
    ("Cancel my plan", "Please cancel my subscription at the end of the month."),
]
POISON = "kaboom"


@pytest.fixture
def engine(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tickets.db'}")
    create_schema(engine, with_demo_source=True)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(engine) -> Settings:
    url = engine.url.render_as_string(hide_password=False)
    return Settings(db_url=url, device="cpu", chunk_size=4, cache_dir="", max_attempts=3)


def add(engine, n: int, first: int = 1, body_for=None) -> list[str]:
    rows = []
    for k in range(first, first + n):
        subject, body = TEXTS[k % len(TEXTS)]
        body = body_for(k, body) if body_for else f"{body} Reference {k}."
        rows.append(dict(ticket_id=k, subject=subject, body=body, created_at=AT, updated_at=AT))
    with writing(engine) as conn:
        conn.execute(sa.insert(tickets), rows)
    return [str(r["ticket_id"]) for r in rows]


def predictor_for(settings: Settings, **encoder_options):
    return build_predictor(settings, StandInEncoder(**encoder_options))


def table(engine, t: sa.Table, *where) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(t).where(*where)))


def statuses(engine, run_id: str) -> dict[str, tuple[str, str | None]]:
    rows = table(engine, inference_run_items, inference_run_items.c.run_id == run_id)
    return {r.ticket_id: (r.status, r.reason) for r in rows}


def raise_on(marker_id: int, exc: Exception):
    def hook(batch_ids, output):
        if any(marker_id in seq for seq in batch_ids):
            raise exc

    return hook


def test_a_run_stores_every_configured_output_for_every_ticket(engine, settings):
    ids = add(engine, 10)
    summary = run_window(settings, "run-1", WINDOW, predictor=predictor_for(settings))
    assert (summary["status"], summary["backlog"], summary["succeeded"]) == ("succeeded", 10, 10)
    results = {r.ticket_id: r for r in table(engine, ticket_results)}
    assert sorted(results) == sorted(ids)
    with engine.connect() as conn:
        source = {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}
    for ticket_id, r in results.items():
        vector = embedding_from_bytes(r.embedding)
        assert r.embedding_dim == 384 == len(vector) and abs(float(np.linalg.norm(vector)) - 1) < 1e-3
        assert r.category in {
            "billing",
            "account_access",
            "technical_issue",
            "feature_request",
            "shipping",
            "cancellation",
        }
        text = f"{source[ticket_id].subject}\n{source[ticket_id].body}"
        sentences = [text[a:b] for a, b in sentence_spans(text)]
        pairs = {f"{a} {b}" for i, a in enumerate(sentences) for b in sentences[i + 1 :]}
        assert r.summary in (set(sentences) if len(sentences) <= 2 else pairs), ticket_id
        assert r.content_hash == content_hash(source[ticket_id].subject, source[ticket_id].body)
    assert table(engine, inference_staging) == []


def test_a_second_run_of_the_same_window_finds_nothing_to_do(engine, settings):
    add(engine, 6)
    predictor = predictor_for(settings)
    run_window(settings, "run-1", WINDOW, predictor=predictor)
    again = run_window(settings, "run-2", WINDOW, predictor=predictor)
    assert (again["backlog"], again["succeeded"]) == (0, 0)
    assert len(table(engine, ticket_results)) == 6


def test_heads_not_configured_stay_null(engine, settings):
    add(engine, 4)
    only = dataclasses.replace(settings, heads=("embedding",))
    run_window(only, "run-1", WINDOW, predictor=predictor_for(only))
    rows = table(engine, ticket_results)
    assert {(r.category, r.summary) for r in rows} == {(None, None)} and all(r.embedding for r in rows)


def test_a_poison_ticket_is_isolated_retried_and_dead_lettered(engine, settings):
    add(engine, 12, body_for=lambda k, body: f"{body} {POISON}" if k == 5 else body + f" #{k}")
    encoder = StandInEncoder()
    encoder.on_forward = raise_on(encoder.token_id(POISON), RuntimeError("model blew up"))
    lenient = dataclasses.replace(settings, max_failure_rate=0.5)
    summary = run_window(lenient, "run-1", WINDOW, predictor=build_predictor(lenient, encoder))
    assert (summary["succeeded"], summary["failed"]) == (11, 1)
    (failure,) = table(engine, ticket_failures)
    assert (failure.ticket_id, failure.error_class, failure.status) == ("5", "model_error", "dead_letter")
    assert failure.attempt == settings.max_attempts
    assert statuses(engine, "run-1")["5"] == ("failed", "model_error")


def test_out_of_memory_is_typed_and_the_rest_of_the_batch_commits(engine, settings):
    add(engine, 8, body_for=lambda k, body: f"{body} {POISON}" if k == 3 else body)
    encoder = StandInEncoder()
    encoder.on_forward = raise_on(encoder.token_id(POISON), MemoryError("out of memory"))
    plan_run(settings, "run-1", WINDOW)
    summary = infer_shard(settings, "run-1", 0, predictor=build_predictor(settings, encoder))
    assert (summary.staged, summary.failed) == (7, 1)
    assert [r.error_class for r in table(engine, ticket_failures)] == [FailureKind.OOM]


def test_nan_outputs_are_never_staged_and_the_float32_retry_recovers_them(engine, settings):
    add(engine, 8)
    encoder = StandInEncoder()

    def nan_in_batches(batch_ids, output):
        if len(batch_ids) > 1:  # a half-precision overflow in batched mode, say
            output.embeddings[0, :] = np.nan

    predictor = build_predictor(settings, encoder)
    encoder.on_forward = nan_in_batches  # after the category prototypes were built
    plan_run(settings, "run-1", WINDOW)
    first = infer_shard(settings, "run-1", 0, predictor=predictor)
    assert first.failed >= 1
    load_results(settings, "run-1")
    assert has_retries(settings, "run-1")
    retried = retry_failed(settings, "run-1", predictor=predictor)
    assert retried.recovered == first.failed and retried.dead_letter == 0
    assert finish_run(settings, "run-1")["succeeded"] == 8


def test_a_ticket_edited_after_inference_is_not_written_with_its_old_text(engine, settings):
    ids = add(engine, 4)
    predictor = predictor_for(settings)
    plan_run(settings, "run-1", WINDOW)
    infer_shard(settings, "run-1", 0, predictor=predictor)
    with writing(engine) as conn:
        conn.execute(
            sa.update(tickets)
            .where(tickets.c.ticket_id == 2)
            .values(body="Actually my parcel arrived broken.", updated_at=AT + dt.timedelta(minutes=5))
        )
    loaded = load_results(settings, "run-1")
    assert (loaded.written, loaded.invalid) == (3, 1)
    assert statuses(engine, "run-1")["2"] == ("failed", "stale_input")
    retry_failed(settings, "run-1", predictor=predictor)
    summary = finish_run(settings, "run-1")
    assert summary["succeeded"] == 4
    stored = {r.ticket_id: r.content_hash for r in table(engine, ticket_results)}
    assert stored["2"] == content_hash(TEXTS[2 % len(TEXTS)][0], "Actually my parcel arrived broken.")
    assert sorted(stored) == sorted(ids)


def test_a_loading_shard_writes_results_without_staging_and_still_refuses_text_edited_meanwhile(engine, settings):
    """infer_shard(load=True), as the DAG runs it: outputs go from memory to ticket_results in the transaction that
    settles their items (staging is only for what waits: a trigger refusing every staged row changes nothing),
    and a ticket edited while the model ran is still judged against its text read again: stale, retried."""
    add(engine, 6)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER no_staging BEFORE INSERT ON inference_staging BEGIN SELECT RAISE(ABORT, 'staged'); END"
        )
    encoder = StandInEncoder()
    predictor = build_predictor(settings, encoder)  # encodes the heads' examples: before the hook below

    def edit_ticket_2(batch_ids, output):
        if len(batch_ids) == 1:  # the self-check's passes, before the chunk of ticket 2 is read
            return
        with writing(engine) as conn:
            conn.execute(
                sa.update(tickets)
                .where(tickets.c.ticket_id == 2, tickets.c.body != "Edited while the model ran.")
                .values(body="Edited while the model ran.", updated_at=AT + dt.timedelta(minutes=5))
            )

    encoder.on_forward = edit_ticket_2
    plan_run(settings, "run-1", WINDOW, RunOptions(shards=1))
    shard = infer_shard(settings, "run-1", 0, predictor=predictor, load=True)
    assert (shard.staged, shard.loaded) == (6, 5)
    assert statuses(engine, "run-1")["2"] == ("failed", "stale_input")
    assert sorted(r.ticket_id for r in table(engine, ticket_results)) == ["1", "3", "4", "5", "6"]
    assert table(engine, inference_staging) == []
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER no_staging")
    retry_failed(settings, "run-1", predictor=predictor_for(settings))
    assert finish_run(settings, "run-1")["succeeded"] == 6
    stored = {r.ticket_id: r.content_hash for r in table(engine, ticket_results)}
    assert stored["2"] == content_hash(TEXTS[2 % len(TEXTS)][0], "Edited while the model ran.")


def test_a_ticket_deleted_after_planning_is_skipped_with_its_reason(engine, settings):
    add(engine, 5)
    plan_run(settings, "run-1", WINDOW)
    with writing(engine) as conn:
        conn.execute(sa.delete(tickets).where(tickets.c.ticket_id == 4))
    infer_shard(settings, "run-1", 0, predictor=predictor_for(settings))
    load_results(settings, "run-1")
    summary = finish_run(settings, "run-1")
    assert (summary["succeeded"], summary["skipped"], summary["reasons"]) == (4, 1, {"deleted": 1})


def test_a_killed_shard_resumes_without_redoing_committed_chunks(engine, settings):
    add(engine, 16)
    encoder = StandInEncoder()
    predictor = build_predictor(settings, encoder)
    plan_run(settings, "run-1", WINDOW, RunOptions(shards=1))
    batched = []

    class Killed(BaseException):
        pass

    def die_on_third_pass(batch_ids, output):
        if len(batch_ids) > 1:  # the chunks' batches (the self-check's single-item passes aside)
            batched.append(len(batch_ids))
            if len(batched) == 3:
                raise Killed  # not an Exception: like a SIGKILL, nothing in the encoder catches it

    encoder.on_forward = die_on_third_pass
    with pytest.raises(Killed):
        infer_shard(settings, "run-1", 0, predictor=predictor)
    committed = [t for t, (status, _) in statuses(engine, "run-1").items() if status == "staged"]
    assert 0 < len(committed) < 16
    fresh = StandInEncoder()
    summary = infer_shard(settings, "run-1", 0, predictor=build_predictor(settings, fresh))
    assert summary.staged + len(committed) == 16
    load_results(settings, "run-1")
    assert finish_run(settings, "run-1")["succeeded"] == 16


def test_a_late_second_copy_of_a_shard_cannot_undo_settled_items(engine, settings):
    add(engine, 6)
    predictor = predictor_for(settings)
    plan_run(settings, "run-1", WINDOW)
    infer_shard(settings, "run-1", 0, predictor=predictor)
    load_results(settings, "run-1")
    late = infer_shard(settings, "run-1", 0, predictor=predictor)  # a zombie copy that started late
    assert (late.staged, late.failed) == (0, 0)
    assert set(statuses(engine, "run-1").values()) == {("succeeded", None)}


def test_a_worker_with_another_model_version_refuses_the_run(engine, settings):
    add(engine, 2)
    plan_run(settings, "run-1", WINDOW)
    other = dataclasses.replace(predictor_for(settings), version="minilm@another")
    with pytest.raises(ModelChanged):
        infer_shard(settings, "run-1", 0, predictor=other)
    assert table(engine, inference_staging) == []


def test_too_many_failures_fail_the_run_with_its_counts(engine, settings):
    add(engine, 4, body_for=lambda k, body: f"{body} {POISON}")
    encoder = StandInEncoder()
    encoder.on_forward = raise_on(encoder.token_id(POISON), RuntimeError("broken"))
    with pytest.raises(RunFailed) as failed:
        run_window(settings, "run-1", WINDOW, predictor=build_predictor(settings, encoder))
    assert (failed.value.summary["failed"], failed.value.summary["status"]) == (4, "failed")


def test_a_dry_run_plans_and_writes_nothing_else(engine, settings):
    add(engine, 5)
    summary = run_window(settings, "run-1", WINDOW, RunOptions(dry_run=True), predictor=predictor_for(settings))
    assert (summary["status"], summary["backlog"]) == ("dry_run", 5)
    assert table(engine, inference_run_items) == [] and table(engine, ticket_results) == []


def test_named_tickets_are_recomputed_whatever_their_dates(engine, settings):
    add(engine, 5)
    predictor = predictor_for(settings)
    run_window(settings, "run-1", WINDOW, predictor=predictor)
    other_day = window_for_date(dt.date(2026, 1, 1))
    summary = run_window(settings, "run-2", other_day, RunOptions(ticket_ids=("2", "4")), predictor=predictor)
    assert (summary["backlog"], summary["succeeded"]) == (2, 2)


def test_shard_specs_carry_ids_and_counts_only(engine, settings):
    add(engine, 9)
    shards = plan_run(settings, "run-1", WINDOW, RunOptions(shards=3))
    assert [s.shard for s in shards] == [0, 1, 2] and sum(s.tickets for s in shards) == 9
    assert all(set(s.as_dict()) == {"run_id", "shard", "tickets", "est_tokens"} for s in shards)
