"""Canaries: ticket text and a connection secret never reach logs, XCom, exceptions or alerts.

A run fails on purpose (poisoned tickets push the failure rate over the threshold); the poisoned
tickets carry a canary string in their text, and the tickets_db connection carries a canary password.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.engine.encoder import Encoder
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import tickets
from inference.window import window_for_date
from tests.support.poison import POISON

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "ticket_batch_inference.py"
WINDOW = window_for_date(dt.date(2026, 11, 29))
TEXT_CANARY = "CANARYTEXT4b1d"
SECRET_CANARY = "CANARYSECRET77e1"


@pytest.fixture
def webhook():
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alerts", received
    server.shutdown()


@pytest.fixture
def failing_run_env(pg_engine, monkeypatch, webhook):
    seed_backlog(pg_engine, 40, [WINDOW], seed=9)
    with writing(pg_engine) as conn:
        for k in (3, 4, 5, 6, 7):
            conn.execute(
                sa.update(tickets)
                .where(tickets.c.ticket_id == k)
                .values(subject=f"{TEXT_CANARY} {POISON}", body=f"Dear support, {TEXT_CANARY} {POISON} is broken")
            )
    url = pg_engine.url
    conn_uri = f"postgresql://{url.username}:{SECRET_CANARY}@{url.host}:{url.port}/{url.database}"
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", conn_uri)  # trust auth: the password is carried, not checked
    monkeypatch.setenv("INFERENCE_DEVICE", "cpu")
    monkeypatch.setenv("INFERENCE_ALERT_CHANNELS", "webhook")
    monkeypatch.setenv("AIRFLOW_CONN_INFERENCE_ALERT_WEBHOOK", json.dumps({"conn_type": "http", "host": webhook[0]}))
    real_forward = Encoder.forward

    def forward(self, batch_ids, width, **kwargs):
        poison_id = self.tokenize([POISON])[0][0][1]
        if any(poison_id in seq for seq in batch_ids):
            raise RuntimeError(f"injected fault while holding {TEXT_CANARY}")  # a careless library message
        return real_forward(self, batch_ids, width, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)


def test_canaries_never_leave_the_worker(airflow_db, failing_run_env, webhook, capfd):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAG_FILE)).get_dag("ticket_batch_inference")
    dag_run = dag.test(logical_date=WINDOW.end)
    out, err = capfd.readouterr()
    logs = out + err

    assert dag_run.state == "failed"  # 5 of 40 failed: above the 5% threshold
    assert "RunFailed" in logs and "failure rate" in logs  # the logs were captured and explain the failure

    # Alerts: one for finish_run, with the fields on-call needs, and nothing else.
    payloads = [json.loads(body) for body in webhook[1]]
    finish = [p for p in payloads if p["task_id"] == "finish_run"]
    assert len(finish) == 1
    alert = finish[0]
    assert alert["dag_id"] == "ticket_batch_inference" and alert["run_id"] == dag_run.run_id
    assert alert["error_class"] == "RunFailed" and alert["try_number"] >= 1
    assert alert["run_summary"]["failed"] == 5 and alert["run_summary"]["backlog"] == 40

    # Nowhere: captured task logs and exceptions, alert payloads, anything Airflow stored on disk
    # (metadata DB with XCom and rendered fields, log files).
    stored = b"".join(p.read_bytes() for p in Path(airflow_db).rglob("*") if p.is_file())
    for canary in (TEXT_CANARY, SECRET_CANARY):
        assert canary not in logs
        assert not any(canary.encode() in body for body in webhook[1])
        assert canary.encode() not in stored
