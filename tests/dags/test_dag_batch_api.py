"""The real DAG with INFERENCE_SUMMARY=batch_api, end to end with dag.test(), against a PostgreSQL tickets
database and the local provider (tests/support/openai_server.py) through the real `openai` SDK.

dag.test() runs a deferred task's trigger in line (Airflow 3: the trigger's event resumes the task in the
same process), so the summarize tasks go through the same defer / resume cycles as under a triggerer.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from inference.engine.encoder import Encoder
from inference.store.batch_tables import inference_batches
from inference.store.schema import inference_run_items, inference_runs, inference_staging
from inference.textprep import content_hash
from inference_airflow.batch_trigger import BatchesEndedTrigger
from tests.support.batch_night import expected_summary, misbehave_first, seed, stored
from tests.support.openai_server import Behaviour, OpenAIServer
from tests.support.poison import POISON, poison_token_id
from tests.support.tickets import W2, add_ticket

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")


@pytest.fixture
def server(pg_engine, monkeypatch):
    """The provider, the Airflow connection the tasks and the trigger read its key and URL from, and the
    tickets database through its connection; summaries from the Batch API, embeddings from MiniLM."""
    with OpenAIServer() as srv:
        conn = {"conn_type": "openai", "host": srv.base_url, "password": srv.api_key}
        monkeypatch.setenv("AIRFLOW_CONN_OPENAI_DEFAULT", json.dumps(conn))
        url = pg_engine.url
        monkeypatch.setenv(
            "AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}"
        )
        monkeypatch.setenv("TICKETS_DB_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/not-this-one")
        for name, value in {
            "INFERENCE_DEVICE": "cpu",
            "INFERENCE_HEADS": "embedding,summary",
            "INFERENCE_SUMMARY": "batch_api",
            "INFERENCE_BATCH_MODEL": "gpt-test",
            "INFERENCE_BATCH_MAX_REQUESTS": "5",
            "INFERENCE_BATCH_RETRY_MAX_REQUESTS": "3",
            "INFERENCE_BATCH_POLL_SECONDS": "0.05",
            "INFERENCE_BATCH_PRICE_INPUT_PER_MTOK": "0.075",
            "INFERENCE_BATCH_PRICE_OUTPUT_PER_MTOK": "0.3",
        }.items():
            monkeypatch.setenv(name, value)
        yield srv


@pytest.fixture
def waits(monkeypatch) -> list[str]:
    """Every wait in the trigger (its run's status when it fired)."""
    seen: list[str] = []
    real = BatchesEndedTrigger.run

    async def run(self):
        async for event in real(self):
            seen.append(event.payload["status"])
            yield event

    monkeypatch.setattr(BatchesEndedTrigger, "run", run)
    return seen


@pytest.fixture
def nan_until_retry(monkeypatch) -> list[str]:
    """The poison ticket's embedding comes out NaN until retry_failed runs (a half-precision overflow,
    say): its shard fails it as nan_output, the retry branch computes it again, then its summary."""
    import inference.pipeline.infer_step as infer_step

    retrying: list[str] = []
    real_forward, real_retry = Encoder.forward, infer_step.retry_failed

    def forward(self, batch_ids, width, **kwargs):
        out = real_forward(self, batch_ids, width, **kwargs)
        if not retrying:
            out.embeddings = out.embeddings.copy()
            for row, seq in enumerate(batch_ids):
                if poison_token_id(self) in seq:
                    out.embeddings[row, :] = np.nan
        return out

    def retry_failed(*args, **kwargs):
        retrying.append("retry_failed")
        return real_retry(*args, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)
    monkeypatch.setattr(infer_step, "retry_failed", retry_failed)
    return retrying


def test_a_night_with_batch_summaries_partial_failures_expiry_and_the_retry_branch(
    dag, pg_engine, server, waits, nan_until_retry
):
    texts = seed(pg_engine, 12)
    poison = (f"Order {POISON}", f"The {POISON} parcel is late. Where is it?")
    add_ticket(pg_engine, 99, *poison, W2.start + dt.timedelta(hours=4))
    texts["99"] = poison
    # The first two batches misbehave the documented ways; resent requests then succeed.
    misbehave_first(server, Behaviour(fail={"3"}, drop={"5"}, expire_after=3, shuffle=False), creates=2)

    dag_run = dag.test(logical_date=W2.end)

    assert dag_run.state == "success"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["summarize_batch"] == states["retry_failed"] == states["summarize_retries"] == "success"
    assert nan_until_retry  # the poison ticket took the retry branch: encoder again, then its summary
    results = stored(pg_engine)
    assert set(results) == set(texts)
    for ticket_id, (subject, body) in texts.items():
        r = results[ticket_id]
        assert r.summary == expected_summary(subject, body), ticket_id
        assert r.content_hash == content_hash(subject, body) and r.embedding_dim == 384
    with pg_engine.connect() as conn:
        run = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == dag_run.run_id)).one()
        parts = list(conn.execute(sa.select(inference_batches).order_by(inference_batches.c.part)))
        items = list(conn.execute(sa.select(inference_run_items)))
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_staging)) == 0
    assert (run.status, run.succeeded, run.failed) == ("succeeded", 13, 0)
    # summarize_batch: 12 requests in parts of 5 (the poison ticket has no encoder outputs yet), then the six
    # failed, expired or missing ones again in parts of 3; summarize_retries: the poison ticket's first one.
    assert [(p.retry_round, p.request_count) for p in parts] == [(0, 5), (0, 5), (0, 2), (1, 3), (1, 3), (0, 1)]
    assert server.creates == 6 and waits.count("ended") == 3  # each round waited in the trigger
    assert {i.ticket_id: i.attempts for i in items if i.attempts != 1} == {
        t: 2 for t in ("12", "2", "3", "5", "6", "7", "99")
    }
    finish = dag_run.get_task_instance("finish_run").xcom_pull(task_ids="finish_run")
    assert finish["batch"]["tickets_replied"] == 13 and finish["batch"]["cost_per_1000_tickets_usd"] > 0


def test_summaries_only_need_no_model_and_a_failing_request_is_dead_lettered(dag, pg_engine, server, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("no encoder is needed when the summary is the only output")

    monkeypatch.setattr(Encoder, "from_settings", classmethod(no_model))
    monkeypatch.setenv("INFERENCE_HEADS", "summary")
    monkeypatch.setenv("INFERENCE_MAX_FAILURE_RATE", "0.5")
    texts = seed(pg_engine, 4)
    server.behaviour = Behaviour(fail={"2"})

    dag_run = dag.test(logical_date=W2.end)

    assert dag_run.state == "success"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["retry_failed"] == states["summarize_retries"] == "skipped"  # the batch step's own rounds did it
    results = stored(pg_engine)
    assert {t: r.summary for t, r in results.items()} == {t: expected_summary(*texts[t]) for t in ("1", "3", "4")}
    with pg_engine.connect() as conn:
        run = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == dag_run.run_id)).one()
    assert (run.succeeded, run.failed) == (3, 1) and server.creates == 3  # ticket 2: three attempts, then dead
