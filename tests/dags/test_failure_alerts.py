"""Failures through the real DAG (dag.test): one alert per incident, each saying what failed, for which window,
why, what to do and where the log is; a broken alert channel logged at error level and reported in the run's
summary; a database refusing a write scrubbed of ticket text everywhere (logs, exceptions, alerts, XCom); the
asset `ticket_results` updated by a successful run.

Receivers are real: a local HTTP server behind the webhook's Airflow connection (the HTTP provider's
HttpNotifier), and a plain local SMTP server (aiosmtpd) that the e-mail channel reaches with TLS on, as a
misconfigured connection would.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.errors import DatabaseRefused, ModelUnavailable
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import inference_runs, tickets
from inference.window import window_for_date
from tests.support.ports import free_port

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
WINDOW = window_for_date(dt.date(2026, 11, 28))
CANARY = "CANARYDAGREFUSE81aa"


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")


@pytest.fixture
def webhook():
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hooks/inference", received
    server.shutdown()


@pytest.fixture
def plain_smtp():
    """A plain SMTP server (no TLS), as a local relay or a test catcher is."""
    from aiosmtpd.controller import Controller

    got: list[bytes] = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802
            got.append(envelope.content)
            return "250 OK"

    port = free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    yield port, got
    controller.stop()


@pytest.fixture
def alert_env(pg_engine, monkeypatch, webhook, plain_smtp):
    """Tickets of one window with the canary in every sentence; alerts to the webhook (through its
    connection) and to e-mail through an SMTP connection that forgot to turn TLS off."""
    seed_backlog(pg_engine, 12, [WINDOW], seed=3)
    with writing(pg_engine) as conn:
        conn.execute(
            sa.update(tickets).values(
                subject=f"{CANARY} refund", body=f"{CANARY} I was charged twice. {CANARY} Please refund it."
            )
        )
    url = pg_engine.url
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}")
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_FEWSHOT", "none")
    monkeypatch.setenv("INFERENCE_ALERT_CHANNELS", "webhook,email")
    monkeypatch.setenv("INFERENCE_ALERT_EMAIL_TO", "oncall@example.test")
    monkeypatch.setenv("AIRFLOW_CONN_INFERENCE_ALERT_WEBHOOK", json.dumps({"conn_type": "http", "host": webhook[0]}))
    smtp = {"conn_type": "smtp", "host": "127.0.0.1", "port": plain_smtp[0], "extra": {"timeout": 5, "retry_limit": 0}}
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", json.dumps(smtp))
    return pg_engine


def _note(dag_run) -> str:
    import sqlalchemy as sa
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.scalar(sa.select(DagRun).where(DagRun.run_id == dag_run.run_id))
        return run.note or ""


def _payloads(webhook) -> list[dict]:
    return [json.loads(body) for body in webhook[1]]


def _stored(airflow_db) -> bytes:
    return b"".join(p.read_bytes() for p in Path(airflow_db).rglob("*") if p.is_file())


def test_a_refused_write_alerts_once_with_the_fix_and_no_ticket_text(
    dag, alert_env, webhook, plain_smtp, airflow_db, capfd, caplog
):
    """A CHECK constraint refuses the results (PostgreSQL quotes the failing row in its DETAIL). The shard loads
    each chunk in the transaction that settles its items, so infer_shard[0] fails at once (no retry) and alerts once;
    nothing stays staged, so the catch-all load_results has nothing to load; finish_run fails its reconciliation
    because of the shard and does not alert again. The e-mail channel cannot deliver (TLS against a plain
    server): logged at error level, and in the run's summary."""
    with alert_env.begin() as conn:
        conn.exec_driver_sql(
            f"ALTER TABLE ticket_results ADD CONSTRAINT ck_no_canary CHECK (strpos(coalesce(summary, ''), '{CANARY}') = 0)"
        )
    dag_run = dag.test(logical_date=WINDOW.end)
    out, err = capfd.readouterr()
    logs = out + err + caplog.text

    states = {(ti.task_id, ti.map_index): ti.state for ti in dag_run.get_task_instances()}
    assert dag_run.state == "failed"
    assert states[("infer_shard", 0)] == "failed" and states[("finish_run", -1)] == "failed"
    assert states[("load_results", -1)] == "success", "nothing stays staged: the refused chunk rolled back"

    payloads = _payloads(webhook)
    assert len(payloads) == 1, f"one alert for one incident: {payloads}"
    alert = payloads[0]
    assert (alert["task_id"], alert["map_index"], alert["error_class"], alert["try_number"]) == (
        "infer_shard",
        0,
        "DatabaseRefused",
        1,
    )
    assert alert["why"] == DatabaseRefused.why and alert["remedy"] == DatabaseRefused.remedy
    assert "ck_no_canary" in alert["detail"] and "SQLSTATE 23514" in alert["detail"]
    assert (alert["window_start"], alert["window_end"]) == (WINDOW.start.isoformat(), WINDOW.end.isoformat())
    assert alert["run_id"] == dag_run.run_id and "infer_shard/mapped/0" in alert["log_url"]
    assert "ALERT DEFERRED for finish_run (RunFailed)" in logs

    # The broken channel: visible at error level, and in the run's summary (finish_run's log and exception).
    assert not plain_smtp[1]
    assert "ALERT NOT DELIVERED through email (SSLError)" in logs and "disable_tls" in logs
    assert "alert of infer_shard[0] was NOT delivered through email (SSLError)" in logs
    assert "**alert NOT delivered**: email (SSLError) for infer_shard[0]" in _note(dag_run)  # the run's note in the UI

    with alert_env.connect() as conn:
        run = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == dag_run.run_id)).one()
    assert run.status == "failed" and "infer_shard[0]: 12 not inferred" in run.error, run.error

    assert CANARY not in logs
    assert not any(CANARY.encode() in body for body in webhook[1])
    assert CANARY.encode() not in _stored(airflow_db)  # XCom, rendered fields, task logs


def test_a_missing_model_alerts_once_from_plan_not_again_from_load_and_finish(
    dag, alert_env, webhook, monkeypatch, capfd, caplog
):
    monkeypatch.setenv("INFERENCE_MODEL", "/nonexistent/model")
    dag_run = dag.test(logical_date=WINDOW.end)
    logs = "".join(capfd.readouterr()) + caplog.text

    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    assert dag_run.state == "failed"
    assert states["plan_run"] == states["load_results"] == states["finish_run"] == "failed", states

    payloads = _payloads(webhook)
    assert [p["task_id"] for p in payloads] == ["plan_run"], payloads
    alert = payloads[0]
    assert alert["error_class"] == "ModelUnavailable" and alert["remedy"] == ModelUnavailable.remedy
    assert "INFERENCE_MODEL" in alert["remedy"] and "/nonexistent/model" in alert["detail"]
    assert alert["why"] == ModelUnavailable.why and alert["window_start"] == WINDOW.start.isoformat()
    assert "ALERT DEFERRED for load_results (ModelUnavailable): same cause (ModelUnavailable) as plan_run" in logs
    assert "ALERT DEFERRED for finish_run (ModelUnavailable)" in logs


def test_a_successful_run_updates_the_ticket_results_asset(dag, alert_env, webhook):
    """Downstream DAGs can be scheduled on fresh results: the run's success is an event of the asset
    ticket_results, with the run's ID, window and counts (no text)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from inference_airflow.assets import TICKET_RESULTS

    dag_run = dag.test(logical_date=WINDOW.end)
    assert dag_run.state == "success" and not webhook[1]
    with create_session() as session:
        events = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == TICKET_RESULTS.uri, AssetEvent.source_run_id == dag_run.run_id)
            .all()
        )
        assert len(events) == 1
        extra = events[0].extra
    assert extra["run_id"] == dag_run.run_id and extra["succeeded"] == 12
    assert (extra["window_start"], extra["window_end"]) == (WINDOW.start.isoformat(), WINDOW.end.isoformat())
    assert CANARY not in json.dumps(extra)
