"""The whole pipeline (plan + infer + load + finish) on PostgreSQL against the engine alone, same tickets."""

from __future__ import annotations

import time

import sqlalchemy as sa

from inference.config import Settings
from inference.pipeline import run_window
from inference.predictor import Predictor
from inference.seed import seed_backlog
from inference.store.db import make_engine
from inference.store.source import Source
from inference.textprep import max_chars_for, model_input
from inference.window import Window


def engine_only(model: Predictor, engine: sa.Engine, settings: Settings, window: Window) -> dict:
    """The same tickets' model inputs, encoded chunk by chunk with nothing else going on."""
    with engine.connect() as conn:
        tickets = list(Source(engine, settings.source).in_window(conn, window))
    texts = [
        t for t in (model_input(x.subject, x.body, max_chars_for(settings.max_seq_length))[0] for x in tickets) if t
    ]
    started = time.perf_counter()
    for k in range(0, len(texts), settings.chunk_size):
        model.encoder.encode(texts[k : k + settings.chunk_size])
    seconds = time.perf_counter() - started
    return {
        "tickets": len(tickets),
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "texts_per_s": round(len(texts) / seconds, 2),
    }


def pipeline(model: Predictor, settings: Settings, window: Window, run_id: str) -> dict:
    started = time.perf_counter()
    summary = run_window(settings, run_id, window, predictor=model)
    seconds = time.perf_counter() - started
    return {
        "backlog": summary["backlog"],
        "succeeded": summary["succeeded"],
        "shards": summary["shards"],
        "seconds": round(seconds, 2),
        "texts_per_s": round(summary["succeeded"] / seconds, 2),
    }


def e2e(db_url: str, n: int, settings: Settings, model: Predictor, window: Window) -> dict:
    engine = make_engine(db_url)
    try:
        seed_backlog(engine, n, [window], seed=7)
        settings = settings.replace(db_url=db_url)
        alone = engine_only(model, engine, settings, window)
        whole = pipeline(model, settings, window, "bench-e2e")
    finally:
        engine.dispose()
    return {"engine_only": alone, "pipeline": whole, "fraction": round(whole["texts_per_s"] / alone["texts_per_s"], 3)}


def load_model(settings: Settings) -> Predictor:
    from inference.predictor import load_predictor

    return load_predictor(settings)
