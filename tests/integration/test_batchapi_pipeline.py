"""INFERENCE_SUMMARY=batch_api through the pipeline's own steps: the CLI's whole run (run_window, one process)
and the DAG's batch step (summarize_batch, one turn per wake-up), the real `openai` SDK against the local
provider (tests/support/openai_server.py), a stand-in encoder for the other heads. Every summary is checked
against the ticket text it belongs to, and the encoder's outputs against the same text."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from inference.batchapi import summarize_all, summarize_batch
from inference.batchapi.settings import BatchSettings
from inference.engine.standin import StandInEncoder
from inference.errors import ModelChanged
from inference.pipeline import finish_run, has_retries, infer_shard, load_results, plan_run, retry_failed, run_window
from inference.predictor import build_predictor
from inference.store.batch_tables import inference_batches
from inference.store.schema import inference_run_items, inference_runs, inference_staging
from inference.textprep import content_hash
from tests.support.batch_night import expected_summary, local_client, misbehave_first, seed, stored
from tests.support.openai_server import Behaviour, OpenAIServer
from tests.support.tickets import W2, edit_ticket, settings_for

RUN = "run-1"


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = local_client(server)
    yield c
    c.close()


def batch_settings(engine, heads=("embedding", "summary"), max_failure_rate=0.05, **batch):
    batch = {"model": "gpt-test", "poll_seconds": 0.01, **batch}
    return settings_for(
        engine,
        heads=heads,
        summary="batch_api",
        batch=BatchSettings(**batch),
        max_attempts=3,
        max_failure_rate=max_failure_rate,
        cache_dir="",
    )


def parts(engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(inference_batches).order_by(inference_batches.c.part)))


def items(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(inference_run_items).where(inference_run_items.c.run_id == RUN))
        return {r.ticket_id: r for r in rows}


def staged(engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(inference_staging)))


def test_summaries_only_a_night_without_a_model_with_its_cost(sqlite_engine, server, client, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("no encoder is needed when the summary is the only output")

    monkeypatch.setattr("inference.predictor.load_predictor", no_model)
    texts = seed(sqlite_engine, 9)
    settings = batch_settings(
        sqlite_engine, heads=("summary",), max_requests=4, price_input_per_mtok=0.075, price_output_per_mtok=0.3
    )

    summary = run_window(settings, RUN, W2, batch_client=client)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", 9)
    assert {t: r.summary for t, r in stored(sqlite_engine).items()} == {
        t: expected_summary(*v) for t, v in texts.items()
    }
    assert server.creates == 3 and summary["model_seconds"] == 0
    cost = summary["batch"]
    assert (cost["parts"], cost["requests"], cost["tickets_replied"], cost["output_tokens"]) == (3, 9, 9, 63)
    expected = (cost["input_tokens"] * 0.075 + cost["output_tokens"] * 0.3) / 1e6
    assert cost["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert cost["cost_per_1000_tickets_usd"] == pytest.approx(expected / 9 * 1000, abs=1e-6)


def test_with_other_heads_summaries_join_the_encoder_outputs_and_failures_go_out_again(db_engine, server, client):
    """Expired, failed and missing requests of the first round are resent in smaller batches; only the
    summary is asked for again (the encoder's outputs stay staged), and each resend counts an attempt."""
    texts = seed(db_engine, 12)
    misbehave_first(server, Behaviour(fail={"3"}, drop={"5"}, expire_after=3, shuffle=False), creates=2)
    settings = batch_settings(db_engine, max_requests=5, retry_max_requests=4)
    predictor = build_predictor(settings, StandInEncoder())

    summary = run_window(settings, RUN, W2, predictor=predictor, batch_client=client)

    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", 12, 0)
    results = stored(db_engine)
    for ticket_id, (subject, body) in texts.items():
        r = results[ticket_id]
        assert r.summary == expected_summary(subject, body) and r.content_hash == content_hash(subject, body)
        assert r.embedding_dim == 384 and len(r.embedding) == 4 * 384
    resent = {"12", "2", "3", "5", "6", "7"}  # parts of 5 in ticket_id order: [1 10 11 12 2] [3 4 5 6 7] [8 9]
    assert {t: i.attempts for t, i in items(db_engine).items()} == {t: 2 if t in resent else 1 for t in texts}
    rows = parts(db_engine)
    assert [(p.retry_round, p.request_count) for p in rows] == [(0, 5), (0, 5), (0, 2), (1, 4), (1, 2)]
    assert sum(p.failed for p in rows) == 6 and server.creates == 5
    assert staged(db_engine) == []


def test_a_request_failing_every_round_is_dead_lettered_and_its_staged_outputs_removed(sqlite_engine, server, client):
    seed(sqlite_engine, 4)
    server.behaviour = Behaviour(fail={"2"})
    settings = batch_settings(sqlite_engine, max_failure_rate=0.5)

    summary = run_window(settings, RUN, W2, predictor=build_predictor(settings, StandInEncoder()), batch_client=client)

    assert (summary["succeeded"], summary["failed"], summary["reasons"]) == (3, 1, {"batch_request_error": 1})
    assert items(sqlite_engine)["2"].attempts == 3 and server.creates == 3
    assert staged(sqlite_engine) == [] and "2" not in stored(sqlite_engine)


def test_a_ticket_edited_after_the_encoder_read_it_is_computed_again_from_the_new_text(sqlite_engine, server, client):
    texts = seed(sqlite_engine, 4)
    settings = batch_settings(sqlite_engine, delete_files=False)  # keep what the provider was sent
    predictor = build_predictor(settings, StandInEncoder())
    (shard,) = plan_run(settings, RUN, W2)
    infer_shard(settings, RUN, shard.shard, predictor=predictor)
    new_body = "Actually the parcel arrived, but broken."
    edit_ticket(sqlite_engine, 2, new_body, W2.start + dt.timedelta(hours=5))

    summarize_all(settings, RUN, client, sleep=lambda s: None)

    sent = [line["custom_id"].split(":")[1] for b in server.batches for line in server.batch_lines(b)]
    assert sorted(sent) == ["1", "3", "4"]  # no summary of a text its embedding was not computed from
    assert items(sqlite_engine)["2"].status == "failed" and items(sqlite_engine)["2"].reason == "stale_input"
    load_results(settings, RUN)
    assert has_retries(settings, RUN)
    retry_failed(settings, RUN, predictor=predictor)  # the encoder again, with the new text
    summarize_all(settings, RUN, client, sleep=lambda s: None)  # the DAG's summarize_retries

    assert finish_run(settings, RUN)["succeeded"] == 4
    r = stored(sqlite_engine)["2"]
    assert r.summary == expected_summary(texts["2"][0], new_body)
    assert r.content_hash == content_hash(texts["2"][0], new_body)


def test_a_restarted_batch_step_waits_for_the_same_batches_without_submitting_again(sqlite_engine, server, client):
    seed(sqlite_engine, 7)
    server.behaviour = Behaviour(polls=3)
    settings = batch_settings(sqlite_engine, heads=("summary",), max_requests=3)
    plan_run(settings, RUN, W2)

    first = summarize_batch(settings, RUN, client)  # submits, then the task defers
    restarted = summarize_batch(settings, RUN, client)  # the worker died; the task starts over

    assert first.wait is not None and len(first.submitted) == 3 and server.creates == 3
    assert restarted.submitted == [] and restarted.wait == first.wait  # same batches, same absolute deadline
    step, turns = restarted, 0
    while step.wait is not None:
        step = summarize_batch(settings, RUN, client, step.wait)
        turns += 1
    assert server.creates == 3 and turns >= 2
    assert finish_run(settings, RUN)["succeeded"] == 7


def test_an_overdue_batch_is_cancelled_then_abandoned_by_the_step(sqlite_engine, server, client):
    seed(sqlite_engine, 2)
    server.behaviour = Behaviour(never_end=True)
    server.cancel = lambda batch_id: server.batches[batch_id]  # a provider that ignores the cancel too
    settings = batch_settings(sqlite_engine, heads=("summary",), max_failure_rate=1.0)
    plan_run(settings, RUN, W2)
    first = summarize_batch(settings, RUN, client)

    cancelled = summarize_batch(settings, RUN, client, first.wait, overdue=True)  # the trigger's deadline
    assert cancelled.cancelled == [0] and cancelled.wait.cancelled  # then one grace (an hour) for it to end
    grace = cancelled.wait.deadline - dt.datetime.now(dt.UTC)
    assert dt.timedelta(minutes=59) < grace <= dt.timedelta(hours=1)
    abandoned = summarize_batch(settings, RUN, client, cancelled.wait, overdue=True)

    assert abandoned.abandoned == 1 and len(abandoned.submitted) == 1  # the retry round went out at once
    assert {i.reason for i in items(sqlite_engine).values()} == {"batch_expired"}


def test_a_worker_with_other_batch_settings_refuses_the_run(sqlite_engine, client):
    seed(sqlite_engine, 2)
    settings = batch_settings(sqlite_engine, heads=("summary",))
    plan_run(settings, RUN, W2)
    other = settings.replace(batch=BatchSettings(model="gpt-test", prompt="Summarise in one word."))
    with pytest.raises(ModelChanged):
        summarize_batch(other, RUN, client)


def test_the_cli_runs_the_night_with_the_sdks_own_key_variables(sqlite_engine, server, monkeypatch, capsys):
    """`python -m inference run` outside Airflow: the key and base URL from OPENAI_API_KEY / OPENAI_BASE_URL."""
    import json

    from inference.cli import main
    from tests.support.tickets import DAY2

    texts = seed(sqlite_engine, 5)
    for name, value in {
        "INFERENCE_HEADS": "summary",
        "INFERENCE_SUMMARY": "batch_api",
        "INFERENCE_BATCH_MODEL": "gpt-test",
        "INFERENCE_BATCH_POLL_SECONDS": "0.01",
        "OPENAI_API_KEY": server.api_key,
        "OPENAI_BASE_URL": server.base_url,
    }.items():
        monkeypatch.setenv(name, value)
    url = sqlite_engine.url.render_as_string(hide_password=False)

    code = main(["--db", url, "run", "--date", DAY2.isoformat()])

    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (code, summary["succeeded"], summary["batch"]["tickets_replied"]) == (0, 5, 5)
    assert {t: r.summary for t, r in stored(sqlite_engine).items()} == {
        t: expected_summary(*v) for t, v in texts.items()
    }
    monkeypatch.delenv("OPENAI_API_KEY")
    with sqlite_engine.connect() as conn:
        runs_before = conn.scalar(sa.select(sa.func.count()).select_from(inference_runs))
    assert main(["--db", url, "run", "--date", DAY2.isoformat(), "--reprocess"]) != 0
    assert "OPENAI_API_KEY" in capsys.readouterr().err  # a clear error, before anything is written
    with sqlite_engine.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_runs)) == runs_before
