"""The report plugin: its FastAPI app (the pages the Run report tab and the nav entry show), the run notes, and
its registration. The real browser opening the tab on a real Airflow: tests/services/test_ui_browser.py."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from inference.config import Settings
from inference.engine.standin import StandInEncoder
from inference.pipeline import run_window
from inference.predictor import build_predictor
from inference.store.db import make_engine
from inference.store.schema import create_schema
from inference_airflow import report_plugin
from tests.unit.test_pipeline_steps import WINDOW, add


@pytest.fixture
def engine(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tickets.db'}")
    create_schema(engine, with_demo_source=True)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(engine) -> Settings:
    url = engine.url.render_as_string(hide_password=False)
    return Settings(db_url=url, device="cpu", chunk_size=4, cache_dir="", max_attempts=3)


@pytest.fixture
def client(engine, settings, monkeypatch):
    monkeypatch.setattr(report_plugin, "_settings", lambda: settings)
    app = report_plugin.create_app()
    app.dependency_overrides[report_plugin.require_run_access] = lambda: None  # the auth manager's job
    return TestClient(app)


def test_the_run_report_tab_and_the_index_page(engine, settings, client):
    add(engine, 8)
    run_window(
        settings, "manual__2026-11-30T02:00:00+00:00", WINDOW, predictor=build_predictor(settings, StandInEncoder())
    )

    page = client.get("/runs/manual__2026-11-30T02%3A00%3A00%2B00%3A00", params={"dag_id": report_plugin.DAG_ID})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Run report manual__2026-11-30T02:00:00+00:00" in page.text and "<svg" in page.text
    assert "<script" not in page.text  # the UI's iframe is sandboxed

    data = client.get("/runs/manual__2026-11-30T02:00:00+00:00", params={"format": "json"}).json()
    assert data["counts"]["by_state"] == {"succeeded": 8}
    assert "Tickets by state" in client.get("/runs/manual__2026-11-30T02:00:00+00:00", params={"format": "text"}).text

    index = client.get("/")
    assert "manual__2026-11-30T02:00:00+00:00" in index.text
    assert "href='runs/manual__2026-11-30T02%3A00%3A00%2B00%3A00'" in index.text  # relative: works behind a prefix

    missing = client.get("/runs/nothing-here")
    assert missing.status_code == 404 and "No report yet" in missing.text
    assert client.get("/runs/nothing-here", params={"format": "json"}).status_code == 404
    other = client.get("/runs/x", params={"dag_id": "another_dag"})
    assert other.status_code == 200 and "for ticket_batch_inference runs only" in other.text


def test_the_pages_need_the_right_to_read_the_dags_runs():
    app = report_plugin.create_app()
    response = TestClient(app).get("/")
    assert response.status_code in (401, 403)


def test_run_notes_show_the_window_then_the_summary():
    run = SimpleNamespace(
        dag_id=report_plugin.DAG_ID,
        data_interval_start=None,
        data_interval_end=None,  # triggered with logical_date null: no data interval
        run_after=dt.datetime(2026, 6, 15, 9, 30, tzinfo=dt.UTC),
        conf={},
    )
    assert report_plugin.note_at_start(run) == "**Window** 2026-06-14 02:00 .. 2026-06-15 02:00 UTC · running"
    run.conf = {"window_start": "2026-06-01", "window_end": "2026-06-03"}
    assert "2026-06-01 02:00 .. 2026-06-04 02:00" in report_plugin.note_at_start(run)

    summary = {
        "status": "succeeded",
        "window_start": "2026-06-14T02:00:00+00:00",
        "window_end": "2026-06-15T02:00:00+00:00",
        "backlog": 20000,
        "succeeded": 19990,
        "failed": 10,
        "skipped": 0,
        "tickets_per_second": 61.2,
        "tokens_per_second": 3400.5,
        "padding_efficiency": 0.991,
        "device_seconds": 330.1,
        "cost_per_1000_tickets": 0.0123,
    }
    note = report_plugin.note_at_end(summary, "succeeded", [])
    assert note.startswith("**succeeded** · window 2026-06-14 02:00 .. 2026-06-15 02:00 UTC")
    assert "20,000 tickets: 19,990 succeeded, 10 failed, 0 skipped" in note and "0.0123 per 1,000 tickets" in note
    assert "padding 99.1%" in note and len(note) <= report_plugin.NOTE_LIMIT
    failed = report_plugin.note_at_end(None, "failed", ["plan_run", "finish_run"])
    assert failed.startswith("**failed** · failed tasks: plan_run, finish_run")


def test_a_note_written_by_a_person_is_left_alone():
    person = SimpleNamespace(dag_id=report_plugin.DAG_ID, dag_run_note=SimpleNamespace(user_id="alice"), note="mine")
    report_plugin.RunNotes._write(person, lambda run: "ours")
    assert person.note == "mine"
    ours = SimpleNamespace(dag_id=report_plugin.DAG_ID, dag_run_note=None, note=None)
    report_plugin.RunNotes._write(ours, lambda run: "ours")
    assert ours.note == "ours"
    other = SimpleNamespace(dag_id="another_dag", dag_run_note=None, note=None)
    report_plugin.RunNotes._write(other, lambda run: "ours")
    assert other.note is None


def test_the_plugin_registers_the_tab_the_page_and_the_listener():
    plugin = report_plugin.InferenceReportPlugin
    (app,) = plugin.fastapi_apps
    assert app["url_prefix"] == "/inference-report"
    tab = next(v for v in plugin.external_views if v["destination"] == "dag_run")
    assert tab["href"] == "inference-report/runs/{RUN_ID}?dag_id={DAG_ID}" and not tab["href"].startswith("/")
    assert any(isinstance(listener, report_plugin.RunNotes) for listener in plugin.listeners)
