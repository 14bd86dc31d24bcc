"""Retention and abandoned runs on SQLite and PostgreSQL: old bookkeeping goes, open failures and results stay,
a run nobody finishes is marked failed and its staging removed; through the library, finish_run and the CLI."""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from inference import cli
from inference.store import retention
from inference.store import schema as s
from inference.store.db import utcnow, writing

NOW = utcnow()


def _run(conn, run_id: str, age: dt.timedelta, status: str, tickets: list[str], failures: dict[str, str] = None):
    planned = NOW - age
    conn.execute(
        sa.insert(s.inference_runs).values(
            run_id=run_id,
            window_start=planned - dt.timedelta(days=1),
            window_end=planned,
            model_version="m@1",
            status=status,
            options={},
            planned_at=planned,
        )
    )
    conn.execute(
        sa.insert(s.inference_run_items),
        [
            dict(run_id=run_id, ticket_id=t, shard=0, est_tokens=5, content_hash="h", status="staged", attempts=1)
            for t in tickets
        ],
    )
    staged = [
        dict(
            run_id=run_id,
            ticket_id=t,
            content_hash="h",
            source_updated_at=planned,
            model_version="m@1",
            truncated=False,
            input_tokens=5,
            created_at=planned,
        )
        for t in tickets
    ]
    conn.execute(sa.insert(s.inference_staging), staged)
    for t, status_ in (failures or {}).items():
        conn.execute(
            sa.insert(s.ticket_failures).values(
                run_id=run_id,
                ticket_id=t,
                attempt=1,
                content_hash="h",
                model_version="m@1",
                error_class="model_error",
                retryable=True,
                status=status_,
                message="fixed text",
                created_at=planned,
                updated_at=planned,
            )
        )


def _count(engine, table, run_id=None) -> int:
    stmt = sa.select(sa.func.count()).select_from(table)
    if run_id is not None:
        stmt = stmt.where(table.c.run_id == run_id)
    with engine.connect() as conn:
        return conn.scalar(stmt)


def _scenario(engine):
    with writing(engine) as conn:
        _run(conn, "old-done", dt.timedelta(days=100), "succeeded", ["1", "2"], {"1": "resolved"})
        _run(conn, "old-dead-letter", dt.timedelta(days=120), "failed", ["3"], {"3": "dead_letter"})
        _run(conn, "recent", dt.timedelta(days=5), "succeeded", ["4"], {"4": "resolved"})
        _run(conn, "stuck", dt.timedelta(hours=50), "running", ["5", "6"])
        _run(conn, "in-progress", dt.timedelta(hours=3), "running", ["7"])


def test_retention_and_abandoned_runs(db_engine):
    _scenario(db_engine)
    done = retention.housekeeping(db_engine, retention_days=90, abandoned_after_hours=48, by="in-progress")

    assert done.abandoned == ["stuck"] and done.staging_removed == 2 and done.items_replanned == 2
    with db_engine.connect() as conn:
        runs = {r.run_id: r for r in conn.execute(sa.select(s.inference_runs))}
        stuck_items = set(
            conn.scalars(sa.select(s.inference_run_items.c.status).where(s.inference_run_items.c.run_id == "stuck"))
        )
        failures = {(f.run_id, f.ticket_id): f.status for f in conn.execute(sa.select(s.ticket_failures))}
    assert runs["stuck"].status == "failed" and runs["stuck"].error.startswith("abandoned")
    assert stuck_items == {"planned"} and _count(db_engine, s.inference_staging, "stuck") == 0
    assert runs["in-progress"].status == "running" and _count(db_engine, s.inference_staging, "in-progress") == 1

    # Old finished runs: gone with their items, staging and resolved failures ...
    assert "old-done" not in runs
    assert (
        _count(db_engine, s.inference_run_items, "old-done") == _count(db_engine, s.inference_staging, "old-done") == 0
    )
    # ... except open failures (a dead-letter is kept until resolved) and the run row they point to.
    assert failures[("old-dead-letter", "3")] == "dead_letter" and "old-dead-letter" in runs
    assert _count(db_engine, s.inference_run_items, "old-dead-letter") == 0
    assert ("old-done", "1") not in failures and failures[("recent", "4")] == "resolved"
    assert done.runs_deleted == 1 and done.runs_kept_for_open_failures == 1
    assert done.rows_deleted["inference_run_items"] == 3

    again = retention.housekeeping(db_engine, retention_days=90, abandoned_after_hours=48)
    assert again.abandoned == [] and again.runs_deleted == 0  # idempotent


def test_retention_zero_days_keeps_everything(db_engine):
    _scenario(db_engine)
    done = retention.apply_retention(db_engine, days=0)
    assert done.runs_deleted == 0 and _count(db_engine, s.inference_runs) == 5


def test_the_cli_command_dry_run_changes_nothing_then_applies(db_engine, capsys):
    _scenario(db_engine)
    url = db_engine.url.render_as_string(hide_password=False)
    assert cli.main(["--db", url, "retention", "--days", "90", "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert dry["dry_run"] and dry["runs_deleted"] == 1 and dry["rows_deleted"]["inference_run_items"] == 3
    assert _count(db_engine, s.inference_runs) == 5 and _count(db_engine, s.inference_run_items) == 7

    assert cli.main(["--db", url, "retention", "--days", "90"]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert done["abandoned"] == ["stuck"] and done["runs_deleted"] == 1
    assert _count(db_engine, s.inference_runs) == 4
