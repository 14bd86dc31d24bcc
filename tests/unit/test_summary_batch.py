"""INFERENCE_SUMMARY=batch_api without a provider: its settings, the model version, and what the local
pipeline does around the Batch API step (a deterministic stand-in encoder, SQLite). The provider side runs
in tests/integration/test_batchapi_pipeline.py."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from inference.batchapi.settings import DEFAULT_PROMPT, BatchSettings
from inference.config import Settings, settings_from_env
from inference.engine.standin import StandInEncoder
from inference.errors import ConfigError, RunFailed
from inference.heads.summary_batch import needs_encoder, uses_batch_api, waiting_columns
from inference.modelinfo import model_version
from inference.pipeline import finish_run, infer_shard, load_results, plan_run
from inference.predictor import build_predictor
from inference.store.db import make_engine, writing
from inference.store.schema import create_schema, inference_run_items, inference_staging, ticket_results, tickets
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
AT = WINDOW.start + dt.timedelta(hours=3)


@pytest.fixture
def engine(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tickets.db'}")
    create_schema(engine, with_demo_source=True)
    with writing(engine) as conn:
        rows = [
            dict(ticket_id=k, subject=f"Order {k}", body=f"My parcel {k} is late. Please check.", created_at=AT)
            for k in range(1, 7)
        ]
        conn.execute(sa.insert(tickets), [{**r, "updated_at": AT} for r in rows])
    yield engine
    engine.dispose()


def batch_settings(engine, heads=("embedding", "summary"), **batch) -> Settings:
    url = engine.url.render_as_string(hide_password=False)
    return Settings(
        db_url=url,
        device="cpu",
        chunk_size=4,
        cache_dir="",
        heads=heads,
        summary="batch_api",
        batch=BatchSettings(model="gpt-test", **batch),
    )


# --- settings -------------------------------------------------------------------------------------------


def test_the_batch_settings_come_from_their_variables():
    settings = settings_from_env(
        {
            "INFERENCE_SUMMARY": "batch_api",
            "INFERENCE_BATCH_MODEL": "gpt-4o-mini",
            "INFERENCE_BATCH_EXTRA_BODY": '{"temperature": 0}',
            "INFERENCE_BATCH_PRICE_INPUT_PER_MTOK": "0.075",
            "INFERENCE_BATCH_DELETE_FILES": "false",
            "INFERENCE_BATCH_CONN_ID": "openai_night",
        }
    )
    batch = settings.batch
    assert (batch.model, batch.extra_body, batch.price_input_per_mtok) == ("gpt-4o-mini", {"temperature": 0}, 0.075)
    assert (batch.delete_files, batch.conn_id, batch.prompt) == (False, "openai_night", DEFAULT_PROMPT)
    assert settings_from_env({}).batch == BatchSettings()  # unconfigured until chosen


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"INFERENCE_SUMMARY": "batch_api"}, "INFERENCE_BATCH_MODEL"),
        ({"INFERENCE_BATCH_EXTRA_BODY": "[1]"}, "INFERENCE_BATCH_EXTRA_BODY"),
        ({"INFERENCE_BATCH_EXTRA_BODY": '{"model": "x"}'}, "INFERENCE_BATCH_EXTRA_BODY"),
        ({"INFERENCE_BATCH_MAX_REQUESTS": "50001"}, "INFERENCE_BATCH_MAX_REQUESTS"),
        ({"INFERENCE_BATCH_POLL_SECONDS": "0"}, "INFERENCE_BATCH_POLL_SECONDS"),
        ({"INFERENCE_BATCH_PRICE_OUTPUT_PER_MTOK": "-1"}, "INFERENCE_BATCH_PRICE_OUTPUT_PER_MTOK"),
    ],
)
def test_bad_batch_settings_are_refused_naming_the_variable(env, named):
    with pytest.raises(ConfigError, match=named):
        settings_from_env(env)


def test_no_model_is_needed_while_the_summary_is_not_configured():
    settings = settings_from_env({"INFERENCE_SUMMARY": "batch_api", "INFERENCE_HEADS": "embedding"})
    assert not uses_batch_api(settings) and needs_encoder(settings) and waiting_columns(settings) == ()


def test_what_needs_the_encoder():
    for heads, encoder in [(("summary",), False), (("embedding", "summary"), True), (("category",), True)]:
        settings = Settings(heads=heads, summary="batch_api", batch=BatchSettings(model="m"))
        assert needs_encoder(settings) is encoder
    assert needs_encoder(Settings(heads=("summary",)))  # extractive: from the encoder pass


def test_the_model_version_follows_what_changes_a_summary():
    base = Settings(heads=("summary",), summary="batch_api", batch=BatchSettings(model="m"))
    version = model_version(base)
    changed = [
        BatchSettings(model="m2"),
        BatchSettings(model="m", prompt="Summarise in French."),
        BatchSettings(model="m", max_tokens=60),
        BatchSettings(model="m", max_chars=5000),
        BatchSettings(model="m", extra_body={"temperature": 0}),
    ]
    for batch in changed:
        assert model_version(base.replace(batch=batch)) != version, batch
    same = [
        BatchSettings(model="m", max_requests=10, retry_max_requests=5, max_bytes=20_000),
        BatchSettings(model="m", poll_seconds=5, deadline_grace_seconds=0, delete_files=False),
        BatchSettings(model="m", price_input_per_mtok=1.0, conn_id="other"),
    ]
    for batch in same:
        assert model_version(base.replace(batch=batch)) == version, batch
    assert model_version(base.replace(summary="extractive")) != version


# --- the local pipeline around the Batch API step ---------------------------------------------------------


def items(engine, run_id: str) -> dict[str, tuple[str, int]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(inference_run_items).where(inference_run_items.c.run_id == run_id))
        return {r.ticket_id: (r.status, r.attempts) for r in rows}


def test_the_encoder_stages_the_other_outputs_and_load_waits_for_the_summary(engine):
    settings = batch_settings(engine)
    plan_run(settings, "run-1", WINDOW)
    shard = infer_shard(settings, "run-1", 0, predictor=build_predictor(settings, StandInEncoder()))
    assert shard.staged == 6

    loaded = load_results(settings, "run-1")

    assert (loaded.written, loaded.invalid) == (0, 0)  # nothing is complete yet, nothing failed
    with engine.connect() as conn:
        staged = list(conn.execute(sa.select(inference_staging)))
        assert conn.scalar(sa.select(sa.func.count()).select_from(ticket_results)) == 0
    assert len(staged) == 6 and all(r.summary is None and r.embedding for r in staged)
    assert set(items(engine, "run-1").values()) == {("staged", 1)}
    with pytest.raises(RunFailed, match="6 of 6 tickets have no final state"):  # never a silent success
        finish_run(settings, "run-1")


def test_with_only_the_summary_configured_no_model_is_loaded(engine, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("the encoder was loaded although every output comes from the Batch API")

    monkeypatch.setattr("inference.pipeline.infer_step.load_predictor", no_model)
    monkeypatch.setattr("inference.predictor.load_predictor", no_model)
    settings = batch_settings(engine, heads=("summary",))
    (shard,) = plan_run(settings, "run-1", WINDOW)

    summary = infer_shard(settings, "run-1", shard.shard)

    assert (summary.staged, summary.failed) == (0, 0)
    assert set(items(engine, "run-1").values()) == {("planned", 0)}  # waiting for the Batch API step
