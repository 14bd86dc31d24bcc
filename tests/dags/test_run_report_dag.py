"""The real DAG with dag.test() (the report plugin loaded from plugins/, as every Airflow component loads it): shard
labels from map_index_template, the run note the plugin's listener writes, task docs and DAG docs, and the report
of the run against the run tables."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.report import build, render
from inference.seed import seed_backlog
from inference.store.schema import inference_run_items, inference_steps
from inference.window import window_for_date

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
DAY = dt.date(2026, 10, 30)
WINDOW = window_for_date(DAY)
N = 40


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")


@pytest.fixture
def tickets_db(pg_engine, monkeypatch):
    seed_backlog(pg_engine, N, [WINDOW], seed=11)
    url = pg_engine.url
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}")
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_FEWSHOT", "none")
    monkeypatch.setenv("INFERENCE_SHARD_TOKENS", "1200")  # two or more mapped shards
    monkeypatch.setenv("INFERENCE_CHUNK_SIZE", "8")
    return pg_engine


def test_dag_docs_owner_and_description(dag):
    assert dag.owner == "ticket-inference" and "Run report" in dag.description
    for section in ("Triggering a run, and its params", "Backfills", "Alerts", "Watching a run"):
        assert section in dag.doc_md
    for task_id in ("plan_run", "infer_shard", "load_results", "has_retries", "retry_failed", "finish_run"):
        assert dag.get_task(task_id).doc_md, task_id


def test_a_run_has_shard_labels_a_note_and_a_report(dag, tickets_db):
    from airflow.utils.session import create_session

    dag_run = dag.test(logical_date=WINDOW.end)
    assert dag_run.state == "success"
    with tickets_db.connect() as conn:
        per_shard = dict(
            conn.execute(
                sa.select(inference_run_items.c.shard, sa.func.count())
                .where(inference_run_items.c.run_id == dag_run.run_id)
                .group_by(inference_run_items.c.shard)
            ).all()
        )
        steps = conn.execute(sa.select(inference_steps.c.step).where(inference_steps.c.run_id == dag_run.run_id)).all()
    labels = {ti.map_index: ti.rendered_map_index for ti in dag_run.get_task_instances() if ti.task_id == "infer_shard"}
    assert len(labels) >= 2
    assert labels == {k: f"shard {k} · {per_shard[k]:,} tickets" for k in labels}
    assert sorted({s.step for s in steps}) == ["finish_run", "infer_shard", "load_results", "plan_run"]

    with create_session() as session:
        from airflow.models.dagrun import DagRun

        note = session.scalar(sa.select(DagRun).where(DagRun.run_id == dag_run.run_id)).note
    assert note.startswith("**succeeded** · window 2026-10-30 02:00 .. 2026-10-31 02:00 UTC"), note
    assert f"{N:,} tickets: {N:,} succeeded, 0 failed, 0 skipped" in note and "tickets/s" in note

    report = build(tickets_db, dag_run.run_id)
    assert report["counts"]["by_state"] == {"succeeded": N}
    assert sum(s["invocations"] for s in report["steps"] if s["step"] == "infer_shard") == len(labels)
    assert f"Run report {dag_run.run_id}" in render(report, "text")
