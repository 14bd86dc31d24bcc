"""INFERENCE_SUMMARY=batch_api on the real distributed Airflow (CeleryExecutor, a CPU and a GPU worker, a
triggerer), with the local provider (tests/support/openai_server.py) on 127.0.0.1 reachable from every
component through the Airflow connection `openai_default`.

The backend is a deployment setting, so this module starts an Airflow of its own with it (the suite's shared
one computes summaries locally). One night: embeddings on the GPU worker, summaries from the Batch API, a
first batch that fails partly and expires partly, and the triggerer killed and restarted while the batch
step is deferred. The step must resume the same batches (the provider bills each part once), run its retry
round, and the run must end complete.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time

import pytest
import sqlalchemy as sa

from inference.store.batch_tables import inference_batches
from inference.store.schema import inference_run_items, ticket_results, tickets
from tests.support.airflow_services import AirflowService, running_airflow, unique_run_id
from tests.support.batch_night import expected_summary, misbehave_first
from tests.support.openai_server import Behaviour, OpenAIServer

DAY, TICKETS, FIRST_ID = dt.date(2026, 7, 1), 24, 7001
POLLS = 25  # a batch stays in_progress for this many polls (one a second): time to restart the triggerer


@pytest.fixture(scope="module")
def provider():
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def batch_airflow(pg_admin_url, broker_url, provider, tmp_path_factory):
    conn = {"conn_type": "openai", "host": provider.base_url, "password": provider.api_key}
    env = {
        "AIRFLOW_CONN_OPENAI_DEFAULT": json.dumps(conn),
        "INFERENCE_HEADS": "embedding,summary",
        "INFERENCE_SUMMARY": "batch_api",
        "INFERENCE_BATCH_MODEL": "gpt-test",
        "INFERENCE_BATCH_MAX_REQUESTS": "10",
        "INFERENCE_BATCH_RETRY_MAX_REQUESTS": "4",
        "INFERENCE_BATCH_POLL_SECONDS": "1",
        "INFERENCE_BATCH_PRICE_INPUT_PER_MTOK": "0.075",
        "INFERENCE_BATCH_PRICE_OUTPUT_PER_MTOK": "0.3",
    }
    home = tmp_path_factory.mktemp("airflow-batch-home")
    with running_airflow(pg_admin_url, broker_url, home, extra_env=env) as svc:
        yield svc


def restart_triggerer(svc: AirflowService) -> None:
    """SIGKILL the triggerer (a crash, a node lost), then start a new one: it takes over the deferred trigger
    from the metadata database once the dead one's heartbeat is stale."""
    proc = svc.procs.pop("triggerer")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    svc.start("triggerer", "triggerer")


def wait_for_state(svc: AirflowService, run_id: str, task_id: str, state: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while svc.task_states(run_id).get(task_id) != state:
        svc.check_alive()
        assert time.monotonic() < deadline, f"{task_id} never {state}: {svc.task_states(run_id)}"
        time.sleep(1)


def test_a_batch_night_survives_a_triggerer_restart_without_paying_twice(batch_airflow, provider):
    svc = batch_airflow
    svc.seed(TICKETS, 1, DAY, FIRST_ID)
    # The first batch: two requests fail, two never run (expired); everything after behaves.
    failing, expired = {str(FIRST_ID + 2), str(FIRST_ID + 5)}, 2
    misbehave_first(provider, Behaviour(polls=POLLS, fail=failing, expire_after=10 - expired, shuffle=False))
    run_id = unique_run_id("batch__")
    svc.trigger({"window_start": DAY.isoformat(), "window_end": DAY.isoformat()}, run_id=run_id)

    wait_for_state(svc, run_id, "summarize_batch", "deferred", timeout=600)  # no worker slot held while it waits
    created = provider.creates
    restart_triggerer(svc)
    final = svc.wait_run(run_id, timeout=900)

    assert final["state"] == "success", svc.task_states(run_id)
    states = svc.task_states(run_id)
    assert states["summarize_batch"] == "success" and states["summarize_retries"] == "skipped"
    engine = svc.engine()
    try:
        with engine.connect() as conn:
            source = {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}
            results = {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}
            parts = list(conn.execute(sa.select(inference_batches).where(inference_batches.c.run_id == run_id)))
            items = list(conn.execute(sa.select(inference_run_items).where(inference_run_items.c.run_id == run_id)))
    finally:
        engine.dispose()
    assert {i.ticket_id for i in items} == set(source) and len(source) == TICKETS  # the seeded window
    assert {i.status for i in items} == {"succeeded"}
    for ticket_id, ticket in source.items():
        r = results[ticket_id]
        assert r.summary == expected_summary(ticket.subject, ticket.body), ticket_id
        assert r.embedding_dim == 384 and r.run_id == run_id
    # Each part was created once: the restart resumed the recorded batches; only the retry round is new.
    assert created == len([p for p in parts if p.retry_round == 0]) >= 3
    assert provider.creates == len(parts) == created + 1  # four failed requests: one retry part of 4
    assert sorted(p.request_count for p in parts if p.retry_round > 0) == [4]
    assert all(p.state == "collected" for p in parts)
    log = svc.task_logs(run_id, "summarize_batch")
    assert "waiting in the triggerer" in log and "every summary from the Batch API is settled" in log
