"""Progress lines and their ETA, the run report against the run tables, and `status`, with the stand-in encoder
on a SQLite file (tests/unit/test_pipeline_steps.py has the fixtures' story). No test here measures real time:
the ETA is checked against a clock the test advances itself, as the model works."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging

import pytest
import sqlalchemy as sa

from inference.cli import main as cli
from inference.config import Settings
from inference.engine.standin import StandInEncoder
from inference.errors import RunNotFound
from inference.pipeline import finish_run, infer_shard, plan_run, run_window
from inference.pipeline import progress as progress_module
from inference.pipeline.overlap import WriteInline
from inference.pipeline.progress import Progress, TerminalBar
from inference.predictor import build_predictor
from inference.report import build, render
from inference.status import collect
from inference.store import metrics
from inference.store.db import make_engine, writing
from inference.store.schema import (
    create_schema,
    inference_chunks,
    inference_run_items,
    inference_runs,
    inference_steps,
    ticket_failures,
    ticket_results,
    tickets,
)
from tests.unit.test_pipeline_steps import POISON, WINDOW, add, raise_on

SECONDS_PER_TICKET = 0.01


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


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(progress_module, "clock", fake)
    return fake


def progress_records(caplog) -> list:
    return [r.progress for r in caplog.records if hasattr(r, "progress")]


# --- progress and ETA ---------------------------------------------------------------------------------------


def test_eta_leaves_out_the_first_chunk_and_is_exact_at_a_steady_pace(clock, caplog):
    caplog.set_level(logging.INFO, logger="inference")
    p = Progress("run-1", "infer_shard", 0, total=1000, done_before=100)
    clock.now += 30.0  # the first chunk also fills the pipeline: slow
    first = p.chunk(100, 0, 5000, 6000)
    assert first.done == 200 and first.eta_seconds == pytest.approx(800 / (100 / 30))
    for _ in range(3):
        clock.now += 10.0  # then 10 tickets/s
        snap = p.chunk(100, 1, 5000, 5500)
    assert snap.done == 500 and snap.failed == 3
    assert snap.eta_seconds == pytest.approx(500 / 10.0)  # the steady pace, not the warm-up's
    assert snap.last_tickets_per_second == pytest.approx(10.0)
    assert snap.tickets_per_second == pytest.approx(400 / 60)
    assert snap.padding_efficiency == pytest.approx(20000 / 22500)
    line = caplog.records[-1].getMessage()
    assert "500/1,000 tickets (50%)" in line and "ETA 50s" in line and "failed 3" in line and "padding" in line


def test_infer_shard_logs_every_chunk_with_an_eta_within_a_fifth_of_the_time_left(
    engine, settings, clock, caplog, monkeypatch
):
    """The model's work advances the test's clock by 10 ms per ticket; at the first line past halfway the ETA is
    compared with the time the rest of the shard then took."""
    from inference.pipeline import infer_step

    # each chunk commits before the model starts the next: the test clock (advanced by the model) reads the same
    monkeypatch.setattr(infer_step, "WriteBehind", WriteInline)
    add(engine, 60)
    settings = dataclasses.replace(settings, chunk_size=6)
    predictor = build_predictor(settings, StandInEncoder())

    def work(batch_ids, _output):
        clock.now += SECONDS_PER_TICKET * len(batch_ids)

    predictor.encoder.on_forward = work
    plan_run(settings, "run-1", WINDOW)
    caplog.set_level(logging.INFO, logger="inference")
    infer_shard(settings, "run-1", 0, predictor=predictor)

    messages = [r.getMessage() for r in caplog.records]
    start = next(m for m in messages if "device cpu" in m)
    assert "token budget 1,024" in start and "chunks of 6 tickets" in start and "60 tickets (0 done before)" in start
    snaps = progress_records(caplog)
    assert len(snaps) == 10 and [s.done for s in snaps] == list(range(6, 61, 6))  # a line per committed chunk
    assert snaps[-1].eta_seconds == 0 and snaps[-1].done == snaps[-1].total == 60
    half = next(s for s in snaps if s.done >= 30)
    actual = snaps[-1].elapsed - half.elapsed
    assert actual > 0 and abs(half.eta_seconds - actual) <= 0.2 * actual, (half.eta_seconds, actual)
    assert half.eta_seconds == pytest.approx(actual, rel=0.05)  # at an even pace it is (nearly) exact


def test_a_resumed_shard_counts_what_an_earlier_attempt_did(engine, settings, caplog):
    add(engine, 12)
    plan_run(settings, "run-1", WINDOW)
    with writing(engine) as conn:  # as if an earlier attempt had settled the first 4
        conn.execute(
            sa.update(inference_run_items)
            .where(inference_run_items.c.ticket_id.in_(["1", "10", "11", "12"]))
            .values(status="staged")
        )
    caplog.set_level(logging.INFO, logger="inference")
    infer_shard(settings, "run-1", 0, predictor=build_predictor(settings, StandInEncoder()))
    snaps = progress_records(caplog)
    assert [s.done for s in snaps] == [8, 12] and snaps[-1].total == 12


def test_the_terminal_bar_redraws_one_line(clock):
    import io

    stream = io.StringIO()
    bar = TerminalBar(stream)
    p = Progress("run-1", "infer_shard", 2, total=10)
    for _ in range(2):
        clock.now += 1
        snap = p.chunk(5, 0, 50, 60)
        bar.emit(logging.LogRecord("inference", logging.INFO, "", 0, snap.line(), None, None))
        bar.emit(_record_with(snap))
    text = stream.getvalue()
    assert "\r\033[K" in text and "shard 2 [" in text and "100%" in text and text.endswith("\n")


def _record_with(snap):
    record = logging.LogRecord("inference", logging.INFO, "", 0, snap.line(), None, None)
    record.progress = snap
    return record


# --- the report agrees with the run tables ------------------------------------------------------------------


def rows(engine, stmt) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(stmt))


def test_the_report_agrees_with_the_run_tables(engine, settings):
    add(engine, 30, body_for=lambda k, body: f"{body} {POISON}" if k == 7 else body)
    with writing(engine) as conn:  # an empty ticket: skipped by plan
        conn.execute(
            sa.insert(tickets).values(
                ticket_id=999, subject=" ", body=None, created_at=WINDOW.start, updated_at=WINDOW.start
            )
        )
    encoder = StandInEncoder(max_batch_size=4)
    lenient = dataclasses.replace(settings, max_failure_rate=0.5, device_hour_price=3.0, max_batch_size=4)
    predictor = build_predictor(lenient, encoder)
    encoder.on_forward = raise_on(encoder.token_id(POISON), RuntimeError("broken"))
    summary = run_window(lenient, "run-1", WINDOW, predictor=predictor)

    report = build(engine, "run-1", price_per_device_hour=3.0, max_batch_size=4)

    items = rows(
        engine, sa.select(inference_run_items.c.status, sa.func.count()).group_by(inference_run_items.c.status)
    )
    assert (
        report["counts"]["by_state"]
        == {status: n for status, n in items}
        == {"failed": 1, "skipped": 1, "succeeded": 29}
    )
    assert report["counts"]["backlog"] == summary["backlog"] == 31
    assert {(e["state"], e["reason"]): e["tickets"] for e in report["counts"]["by_reason"]} == {
        ("failed", "model_error"): 1,
        ("skipped", "empty_input"): 1,
    }
    fails = rows(engine, sa.select(ticket_failures.c.error_class, ticket_failures.c.status, ticket_failures.c.attempt))
    assert [(f["error_class"], f["status"], f["tickets"], f["max_attempt"]) for f in report["failures"]] == [
        (ec, st, 1, attempt) for ec, st, attempt in fails
    ]

    (run,) = rows(engine, sa.select(inference_runs))
    chunk_rows = rows(engine, sa.select(inference_chunks))
    model = report["model"]
    assert (model["real_tokens"], model["padded_tokens"]) == (run.real_tokens, run.padded_tokens)
    assert model["real_tokens"] == sum(c.real_tokens for c in chunk_rows)
    assert model["padded_tokens"] == sum(c.padded_tokens for c in chunk_rows)
    assert model["model_seconds"] == pytest.approx(run.device_seconds, abs=1e-3)
    assert model["padding_efficiency"] == summary["padding_efficiency"]
    assert model["tickets"] == summary["model_tickets"] == 30
    assert model["tickets_per_second"] == summary["tickets_per_second"]
    assert model["model_wall_seconds"] == pytest.approx(summary["model_wall_seconds"], abs=1e-3)
    assert model["processing_seconds"] == pytest.approx(summary["processing_seconds"], abs=1e-3)
    assert 0 < model["processing_seconds"] <= model["model_wall_seconds"]
    first_started = min(c.step_started_at for c in chunk_rows if c.step == "infer_shard")
    assert (
        model["processing_seconds"]
        >= (max(c.committed_at for c in chunk_rows if c.step == "infer_shard") - first_started).total_seconds() - 1e-3
    )

    steps = rows(engine, sa.select(inference_steps).order_by(inference_steps.c.started_at))
    assert [s.step for s in steps] == ["plan_run", "infer_shard", "load_results", "retry_failed", "finish_run"]
    assert all(s.status == "succeeded" and s.finished_at >= s.started_at for s in steps)
    walls = {e["step"]: e["wall_seconds"] for e in report["steps"]}
    for s in steps:
        assert walls[s.step] == pytest.approx((s.finished_at - s.started_at).total_seconds(), abs=1e-3)
    model_spans = [s for s in steps if s.step in ("infer_shard", "retry_failed")]
    device = sum((s.finished_at - s.started_at).total_seconds() for s in model_spans)
    assert model["device_seconds"] == pytest.approx(device, abs=1e-3)
    assert report["cost"]["per_1000_tickets"] == pytest.approx(3.0 * device / 3600 / 30 * 1000, rel=1e-3)

    results = rows(engine, sa.select(ticket_results))
    batches = report["batch_sizes"]
    assert batches["batches"] == sum(len(c.batch_sizes) for c in chunk_rows) and batches["max"] <= 4
    assert batches["tickets"] == sum(sum(c.batch_sizes) for c in chunk_rows)
    assert 0 < batches["at_cap_share"] <= 1
    lengths = report["token_lengths"]
    assert lengths["tickets"] == len(results)
    assert lengths["mean"] == pytest.approx(sum(r.input_tokens for r in results) / len(results), abs=0.01)
    assert lengths["max"] == max(r.input_tokens for r in results)
    categories = {}
    for r in results:
        categories[r.category] = categories.get(r.category, 0) + 1
    assert report["categories"]["counts"] == categories
    assert report["outputs"]["truncated"] == sum(r.truncated for r in results)
    assert report["outputs"]["uncertain"] == sum(bool(r.category_uncertain) for r in results)
    (poison_attempts,) = {attempt for _, _, attempt in fails}
    # 30 tickets through infer_shard, then the poison one again in each retry pass
    assert sum(e["tickets"] for e in report["chunks"]["series"]) == sum(c.tickets for c in chunk_rows)
    assert sum(c.tickets for c in chunk_rows) == 30 + poison_attempts - 1

    texts = {fmt: render(report, fmt) for fmt in ("text", "md", "html", "json")}
    assert json.loads(texts["json"])["counts"]["backlog"] == 31
    assert "<svg" in texts["html"] and "<script" not in texts["html"]
    body = rows(engine, sa.select(tickets.c.body).where(tickets.c.ticket_id == 3))[0].body
    for fmt, text in texts.items():  # IDs, counts, timings, labels: never ticket text
        assert body not in text and "Reference 3" not in text, fmt


def test_categories_are_compared_with_the_trailing_nights(engine, settings):
    started = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    with writing(engine) as conn:
        for night in range(5):
            run_id = f"night-{night}"
            window_start = started + dt.timedelta(days=night)
            conn.execute(
                sa.insert(inference_runs).values(
                    run_id=run_id,
                    window_start=window_start,
                    window_end=window_start + dt.timedelta(days=1),
                    model_version="v",
                    status="succeeded",
                    options={},
                    backlog=100,
                    succeeded=100,
                    planned_at=window_start + dt.timedelta(days=1),
                    finished_at=window_start + dt.timedelta(days=1),
                )
            )
            labels = {"billing": 50, "shipping": 50} if night < 4 else {"billing": 90, "shipping": 10}
            metrics.add_chunk(
                conn,
                run_id=run_id,
                step="infer_shard",
                shard=0,
                step_started_at=window_start,
                seq=1,
                committed_at=window_start + dt.timedelta(seconds=10),
                tickets=100,
                staged=100,
                failed=0,
                skipped=0,
                truncated=0,
                uncertain=10 if night < 4 else 40,
                real_tokens=1000,
                padded_tokens=1100,
                model_seconds=5.0,
                batch_sizes=[50, 50],
                token_lengths={10: 100},
                categories=labels,
            )
    report = build(engine, None)  # the latest run
    c = report["categories"]
    assert report["run"]["run_id"] == "night-4" and c["trailing_nights"] == 4
    assert c["shares"] == {"billing": 0.9, "shipping": 0.1} and c["trailing_shares"] == {
        "billing": 0.5,
        "shipping": 0.5,
    }
    assert c["drift"]["flagged"] and c["drift"]["total_variation"] == pytest.approx(0.4)
    assert (c["uncertain_share"], c["trailing_uncertain_share"]) == (0.4, 0.1)
    assert len(c["history"]) == 4
    html = render(report, "html")
    assert "DRIFT" in render(report, "text") and html.count("<svg") >= 3


def test_a_run_that_failed_before_planning_shows_in_status_and_report(engine, settings, capsys):
    add(engine, 3)
    run_window(settings, "run-ok", WINDOW, predictor=build_predictor(settings, StandInEncoder()))
    with pytest.raises(RunNotFound):
        finish_run(settings, "never-planned")  # what the DAG's finish_run does after plan died
    found = collect(settings)
    by_id = {r["run_id"]: r for r in found["runs"]}
    assert by_id["never-planned"]["status"] == "failed before planning"
    assert "RunNotFound" in by_id["never-planned"]["error"]
    ok = by_id["run-ok"]
    assert ok["window_start"] == WINDOW.start.isoformat() and ok["real_tokens"] > 0 and ok["tickets_per_second"]
    assert ok["duration_seconds"] is not None

    assert cli(["--db", settings.db_url, "status"]) == 0
    out = capsys.readouterr().out
    assert "failed before planning" in out and "tickets/s" in out and "window" in out
    assert cli(["--db", settings.db_url, "report", "never-planned"]) == 0
    assert "failed before planning" in capsys.readouterr().out


def test_report_command_formats_and_errors(engine, settings, tmp_path, capsys):
    add(engine, 5)
    run_window(settings, "run-1", WINDOW, predictor=build_predictor(settings, StandInEncoder()))
    out = tmp_path / "r.html"
    assert cli(["--db", settings.db_url, "report", "run-1", "--format", "html", "-o", str(out)]) == 0
    assert out.read_text().startswith("<!doctype html>")
    assert cli(["--db", settings.db_url, "report", "--format", "md"]) == 0
    assert "# Run report run-1" in capsys.readouterr().out
    assert cli(["--db", settings.db_url, "report", "no-such-run"]) == 1
    assert "no-such-run" in capsys.readouterr().err
