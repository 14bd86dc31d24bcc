"""The real DAG, end to end with dag.test(), against a PostgreSQL tickets database."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.engine.encoder import Encoder
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import inference_run_items, inference_runs, ticket_failures, ticket_results, tickets
from inference.textprep import content_hash
from inference.window import window_for_date
from tests.support.poison import POISON

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)
N = 80


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")


@pytest.fixture
def tickets_db(pg_engine, monkeypatch):
    """A seeded window with an empty ticket and a ticket the (injected) model fault rejects."""
    seed_backlog(pg_engine, N, [WINDOW], seed=5)
    inside = WINDOW.start + dt.timedelta(hours=3)
    with writing(pg_engine) as conn:
        conn.execute(
            sa.insert(tickets), [dict(ticket_id=5001, subject="", body=None, created_at=inside, updated_at=inside)]
        )
        conn.execute(sa.update(tickets).where(tickets.c.ticket_id == 9).values(body=f"the {POISON} parcel is late"))
    # Through the Airflow connection (the adapter under test); TICKETS_DB_URL is only the fallback.
    url = pg_engine.url
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}")
    monkeypatch.setenv("TICKETS_DB_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/not-this-one")
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_SHARD_TOKENS", "1500")  # several mapped shards
    monkeypatch.setenv("INFERENCE_CHUNK_SIZE", "16")
    return pg_engine


@pytest.fixture
def poisoned(monkeypatch):
    """Fault injection in the model call (dag.test runs tasks in this process)."""
    real_forward = Encoder.forward

    def forward(self, batch_ids, width, **kwargs):
        poison_id = self.tokenize([POISON])[0][0][1]
        if any(poison_id in seq for seq in batch_ids):
            raise RuntimeError("injected model fault")
        return real_forward(self, batch_ids, width, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)


def test_nightly_run_processes_the_window_row_by_row(dag, tickets_db, poisoned):
    dag_run = dag.test(logical_date=WINDOW.end)  # the run at the end of the window, as `dags test` would
    assert dag_run.state == "success"
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert states["retry_failed"] == "success"  # the poison ticket took the retry branch
    assert states["finish_run"] == "success"
    assert sum(1 for ti in dag_run.get_task_instances() if ti.task_id == "infer_shard") >= 2

    with tickets_db.connect() as conn:
        source = {str(r.ticket_id): r for r in conn.execute(sa.select(tickets))}
        results = conn.execute(sa.select(ticket_results)).all()
        items = {
            r.ticket_id: r
            for r in conn.execute(sa.select(inference_run_items).where(inference_run_items.c.run_id == dag_run.run_id))
        }
        failures = conn.execute(sa.select(ticket_failures)).all()
        run = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == dag_run.run_id)).one()

    by_id = {r.ticket_id: r for r in results}
    assert len(by_id) == len(results) == N - 1  # exactly one result per ticket; the poison one has none
    assert set(items) == set(source)  # every ticket of the window is accounted for, nothing else
    for ticket_id, s in source.items():
        if ticket_id == "9":
            assert items[ticket_id].status == "failed" and items[ticket_id].reason == "model_error"
        elif ticket_id == "5001":
            assert items[ticket_id].status == "skipped" and items[ticket_id].reason == "empty_input"
        else:
            assert items[ticket_id].status == "succeeded"
            assert by_id[ticket_id].content_hash == content_hash(s.subject, s.body)
            assert by_id[ticket_id].run_id == dag_run.run_id
    assert [(f.ticket_id, f.error_class, f.status) for f in failures] == [("9", "model_error", "dead_letter")]
    assert (run.status, run.backlog, run.succeeded, run.failed, run.skipped) == ("succeeded", N + 1, N - 1, 1, 1)
    assert (run.window_start, run.window_end) == WINDOW
