"""The report's queries on both dialects: per-night category totals added up by the database (PostgreSQL's
json_each_text, SQLite's json_each), steps upserted by their key, and a report of nights stored that way."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from inference.report import build
from inference.store import metrics
from inference.store.db import writing
from inference.store.schema import inference_runs

T0 = dt.datetime(2026, 11, 1, 2, tzinfo=dt.UTC)


def _night(conn, run_id: str, day: int, chunks: list[dict]) -> None:
    start = T0 + dt.timedelta(days=day)
    conn.execute(
        sa.insert(inference_runs).values(
            run_id=run_id,
            window_start=start,
            window_end=start + dt.timedelta(days=1),
            model_version="v",
            status="succeeded",
            options={},
            backlog=10,
            succeeded=10,
            planned_at=start + dt.timedelta(days=1),
        )
    )
    for k, labels in enumerate(chunks, 1):
        n = sum(labels.values())
        metrics.add_chunk(
            conn,
            run_id=run_id,
            step="infer_shard",
            shard=0,
            step_started_at=start,
            seq=k,
            tickets=n,
            staged=n,
            failed=0,
            skipped=0,
            truncated=0,
            uncertain=1,
            real_tokens=10 * n,
            padded_tokens=11 * n,
            model_seconds=0.5,
            batch_sizes=[n],
            token_lengths={10: n},
            categories=labels,
        )


def test_category_totals_are_added_up_per_night(db_engine):
    with writing(db_engine) as conn:
        _night(conn, "n1", 0, [{"billing": 3, "shipping": 1}, {"billing": 2, "cancellation": 4}])
        _night(conn, "n2", 1, [{"shipping": 5}])
        _night(conn, "n3", 2, [{"billing": 9, "shipping": 1}])
    with db_engine.connect() as conn:
        totals = metrics.category_totals(conn, ["n1", "n2", "missing"])
        outputs = metrics.output_totals(conn, ["n1", "n2"])
    assert totals == {"n1": {"billing": 5, "shipping": 1, "cancellation": 4}, "n2": {"shipping": 5}, "missing": {}}
    assert outputs == {"n1": (10, 2), "n2": (5, 1)}

    report = build(db_engine, "n3")
    c = report["categories"]
    assert c["trailing_nights"] == 2 and c["counts"] == {"billing": 9, "shipping": 1}
    assert c["trailing_shares"]["shipping"] == round((0.1 + 1.0) / 2, 4)


def test_a_step_row_is_closed_by_its_key_or_written_whole(db_engine):
    started = T0 + dt.timedelta(hours=1)
    with writing(db_engine) as conn:
        metrics.start_step(conn, "r", "infer_shard", 2, started)
        metrics.finish_step(
            conn,
            run_id="r",
            step="infer_shard",
            shard=2,
            started_at=started,
            finished_at=started + dt.timedelta(seconds=90),
            status="succeeded",
            error=None,
        )
        metrics.finish_step(  # its start was never recorded (the tables did not exist yet)
            conn,
            run_id="r",
            step="plan_run",
            shard=-1,
            started_at=started,
            finished_at=started,
            status="failed",
            error="SchemaOutdated: x" * 50,
        )
    with db_engine.connect() as conn:
        rows = {(r.step, r.shard): r for r in metrics.steps(conn, "r")}
    assert rows[("infer_shard", 2)].status == "succeeded"
    assert (rows[("infer_shard", 2)].finished_at - started).total_seconds() == 90
    assert rows[("plan_run", -1)].status == "failed" and len(rows[("plan_run", -1)].error) == 200
