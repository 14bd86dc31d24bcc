"""A night of the Batch API backend in a test: tickets in, a planned run, the backend's context, and views
of the run tables. The provider is tests/support/openai_server.py."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from inference.batchapi import BatchClient, BatchContext, BatchSettings, run_batches
from inference.pipeline import load_results, plan_run
from inference.store.schema import inference_run_items, ticket_failures, ticket_results
from inference.store.source import Source
from inference.textprep import model_input
from tests.support.openai_server import fake_summary
from tests.support.tickets import W2, add_ticket, settings_for

RUN = "batch-run-1"


def local_client(server) -> BatchClient:
    """The real SDK client pointed at the local provider, with short pauses between download retries."""
    return BatchClient.connect(server.api_key, server.base_url, timeout=20, retry_pause=0.01)


def seed(engine, n: int, start: int = 1) -> dict[str, tuple[str, str]]:
    """n tickets with distinct text in W2; returns ticket_id -> (subject, body)."""
    out = {}
    for k in range(start, start + n):
        subject, body = f"Order {k} problem", f"Ticket {k}: my parcel {k * 7} is late. Please check it. Thanks!"
        add_ticket(engine, k, subject, body, W2.start + dt.timedelta(minutes=k))
        out[str(k)] = (subject, body)
    return out


def setup_run(engine, n: int, max_failure_rate: float = 0.05, **batch):
    """n tickets, the run RUN planned over them (summary head only), and the backend's context."""
    settings = settings_for(engine, heads=("summary",), max_attempts=3, max_failure_rate=max_failure_rate)
    texts = seed(engine, n)
    plan_run(settings, RUN, W2)
    ctx = BatchContext(engine, Source(engine, settings.source), BatchSettings(model="gpt-test", **batch), 3)
    return settings, ctx, texts


def expected_summary(subject: str, body: str) -> str:
    return fake_summary(model_input(subject, body, 12_000)[0])


def night(settings, ctx, client):
    """Every round of the backend, without sleeping between polls."""
    return run_batches(ctx, client, RUN, lambda: load_results(settings, RUN), sleep=lambda s: None)


def stored(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def item_states(engine) -> dict[str, tuple[str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(inference_run_items).where(inference_run_items.c.run_id == RUN))
        return {r.ticket_id: (r.status, r.reason) for r in rows}


def failures_of(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_failures))}


def misbehave_first(server, behaviour, creates: int = 1) -> None:
    """The provider misbehaves (`behaviour`) for its first `creates` batches, then behaves: a retry round
    recovers. Works wherever the batches are created (a DAG run in this process, the CLI's run)."""
    from tests.support.openai_server import Behaviour

    real = server.create_batch

    def create(body):
        server.behaviour = behaviour if server.creates < creates else Behaviour()
        return real(body)

    server.create_batch = create
