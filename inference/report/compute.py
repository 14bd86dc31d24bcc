"""Collect a run's report from the run tables and compute it with pandas.

The database does the per-ticket work (GROUP BY over the run's items and failures); pandas then works on small
frames only: one row per committed chunk (a 1M-ticket run in chunks of 2,048 has ~500), its batch sizes (one per
forward pass), and histograms keyed by token length and by category. Memory therefore does not grow with the
number of tickets. Nothing here reads ticket text or outputs: IDs, counts, timings, token lengths and labels.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import sqlalchemy as sa

from inference.errors import RunNotFound
from inference.report.chunk_stats import (
    batch_sizes,
    chunk_frame,
    chunk_throughput,
    outputs,
    token_lengths,
)
from inference.report.timing import MODEL_STEPS, cost_per_1000, per_second, spans, timing
from inference.store import metrics
from inference.store import schema as s

STEP_ORDER = ("plan_run", "infer_shard", "load_results", "retry_failed", "finish_run")
TRAILING_NIGHTS = 30
DRIFT_THRESHOLD = 0.10  # total variation distance between category shares that the report flags


def latest_run_id(conn: sa.Connection) -> str | None:
    r = s.inference_runs.c
    return conn.scalar(sa.select(r.run_id).order_by(r.planned_at.desc()).limit(1))


def build(
    engine: sa.Engine,
    run_id: str | None = None,
    *,
    price_per_device_hour: float = 0.0,
    max_batch_size: int | None = None,
    trailing: int = TRAILING_NIGHTS,
) -> dict[str, Any]:
    """The report of `run_id` (default: the latest run) as plain JSON-able values."""
    import pandas as pd  # noqa: F401 - fail here, not halfway, when pandas is missing

    with engine.connect() as conn:
        if run_id is None:
            run_id = latest_run_id(conn)
            if run_id is None:
                raise RunNotFound("no run has been recorded yet (inference_runs is empty)")
        run = conn.execute(sa.select(s.inference_runs).where(s.inference_runs.c.run_id == run_id)).first()
        step_rows = spans(metrics.steps(conn, run_id))
        if run is None:
            if not step_rows:
                raise RunNotFound(f"run {run_id!r} has not been recorded (no row in inference_runs or inference_steps)")
            return _unplanned(run_id, step_rows)
        states = _states(conn, run_id)
        failures = _failures(conn, run_id)
        model_tickets = metrics.model_tickets(conn, run_id)
        chunk_rows = metrics.chunks(conn, [run_id])
        history = _history(conn, run, trailing)

    t = timing(step_rows)
    chunks = chunk_frame(chunk_rows)
    report: dict[str, Any] = {
        "run": _run_section(run),
        "counts": _counts(run, states),
        "steps": _steps(t),
        "model": _model(run, t, model_tickets, chunks),
        "chunks": chunk_throughput(chunks),
        "batch_sizes": batch_sizes(chunks, max_batch_size),
        "token_lengths": token_lengths(chunks),
        "failures": failures,
        "outputs": outputs(chunks),
        "categories": _categories(run_id, chunks, history),
        "cost": _cost(t, run, model_tickets, price_per_device_hour),
    }
    return report


# --- queries (aggregated in the database) -------------------------------------------------------------------


def _states(conn: sa.Connection, run_id: str) -> list[dict]:
    i = s.inference_run_items.c
    stmt = (
        sa.select(i.status, i.reason, sa.func.count())
        .where(i.run_id == run_id)
        .group_by(i.status, i.reason)
        .order_by(i.status, i.reason)
    )
    return [{"state": st, "reason": reason, "tickets": int(n)} for st, reason, n in conn.execute(stmt)]


def _failures(conn: sa.Connection, run_id: str) -> list[dict]:
    f = s.ticket_failures.c
    stmt = (
        sa.select(f.error_class, f.status, sa.func.count(), sa.func.max(f.attempt))
        .where(f.run_id == run_id)
        .group_by(f.error_class, f.status)
        .order_by(f.error_class, f.status)
    )
    return [
        {"error_class": ec, "status": st, "tickets": int(n), "max_attempt": int(a or 0)}
        for ec, st, n, a in conn.execute(stmt)
    ]


def _history(conn: sa.Connection, run: sa.Row, trailing: int) -> list[dict]:
    """The runs before this one (by window, then plan time) that staged something, oldest first, with their
    category counts and uncertain and staged totals from their chunks."""
    r = s.inference_runs.c
    before = sa.or_(
        r.window_start < run.window_start, sa.and_(r.window_start == run.window_start, r.planned_at < run.planned_at)
    )
    prior = list(
        conn.execute(
            sa.select(r.run_id, r.window_start)
            .where(before, r.status != "dry_run", r.succeeded > 0)
            .order_by(r.window_start.desc(), r.planned_at.desc())
            .limit(trailing)
        )
    )
    if not prior:
        return []
    ids = [p.run_id for p in prior]
    labels, outputs = metrics.category_totals(conn, ids), metrics.output_totals(conn, ids)
    totals = {
        p.run_id: {
            "run_id": p.run_id,
            "window_start": p.window_start,
            "categories": Counter(labels.get(p.run_id, {})),
            "staged": outputs.get(p.run_id, (0, 0))[0],
            "uncertain": outputs.get(p.run_id, (0, 0))[1],
        }
        for p in prior
    }
    return sorted((e for e in totals.values() if e["staged"]), key=lambda e: e["window_start"])


# --- frames and sections ------------------------------------------------------------------------------------


def _run_section(run: sa.Row) -> dict:
    finished = run.finished_at
    return {
        "run_id": run.run_id,
        "status": run.status,
        "window_start": _iso(run.window_start),
        "window_end": _iso(run.window_end),
        "model_version": run.model_version,
        "options": run.options or {},
        "shards": run.shards,
        "planned_at": _iso(run.planned_at),
        "finished_at": _iso(finished),
        "wall_seconds": round((finished - run.planned_at).total_seconds(), 3) if finished else None,
        "error": run.error,
    }


def _counts(run: sa.Row, states: list[dict]) -> dict:
    by_state: dict[str, int] = {}
    for entry in states:
        by_state[entry["state"]] = by_state.get(entry["state"], 0) + entry["tickets"]
    items = sum(by_state.values())
    return {
        "backlog": items if items else run.backlog,
        "by_state": dict(sorted(by_state.items())),
        "by_reason": [e for e in states if e["reason"] is not None],
        # what finish_run recorded (zero until it ran)
        "recorded": {"backlog": run.backlog, "succeeded": run.succeeded, "failed": run.failed, "skipped": run.skipped},
        # the source: extra rows of one ticket ID dropped by plan; results of deleted tickets removed by load
        "source": {"duplicate_rows": run.source_duplicates, "retracted": run.retracted},
    }


def _steps(t) -> list[dict]:
    names = [n for n in STEP_ORDER if n in t.invocations] + sorted(set(t.invocations) - set(STEP_ORDER))
    return [
        {
            "step": name,
            "invocations": t.invocations[name],
            "unfinished": t.unfinished.get(name, 0),
            "wall_seconds": round(t.per_step.get(name, 0.0), 3),
        }
        for name in names
    ]


def _model(run: sa.Row, t, model_tickets: int, chunks) -> dict:
    from inference.report.timing import union_seconds

    spans_ = []
    if not chunks.empty:  # per model-task invocation: from its first chunk's start to its last commit
        grouped = chunks.groupby(["step", "shard", "step_started_at"])["committed_at"].max()
        spans_ = [(started.to_pydatetime(), end.to_pydatetime()) for (_, _, started), end in grouped.items()]
    processing = union_seconds(spans_) or t.model_wall_seconds
    return {
        "tickets": model_tickets,
        "real_tokens": int(run.real_tokens),
        "padded_tokens": int(run.padded_tokens),
        "padding_efficiency": round(run.real_tokens / run.padded_tokens, 4) if run.padded_tokens else None,
        "model_seconds": round(run.device_seconds, 3),  # the encoder's own time (inference_runs.device_seconds)
        "model_wall_seconds": round(t.model_wall_seconds, 3),  # while at least one model task ran
        "processing_seconds": round(processing, 3),  # ... and worked on chunks (model loading excluded)
        "device_seconds": round(t.device_seconds, 3),  # model tasks' wall time added up
        "model_busy_share": round(run.device_seconds / t.device_seconds, 4) if t.device_seconds else None,
        "tickets_per_second": per_second(model_tickets, processing),
        "tokens_per_second": per_second(run.real_tokens, processing),
        "tickets_per_second_with_loading": per_second(model_tickets, t.model_wall_seconds),
        "model_steps": list(MODEL_STEPS),
    }


def _categories(run_id: str, frame, history: list[dict]) -> dict:
    import pandas as pd

    mine: Counter = Counter()
    for histogram in frame.get("categories", []):
        mine.update({k: int(v) for k, v in histogram.items()})
    staged = int(frame["staged"].sum()) if not frame.empty else 0
    uncertain = int(frame["uncertain"].sum()) if not frame.empty else 0
    if not mine and not history:
        return {"labelled": 0}
    nights = (
        pd.DataFrame([{**e["categories"], "_run": e["run_id"]} for e in history] + [{**mine, "_run": run_id}])
        .set_index("_run")
        .fillna(0)
    )
    shares = nights.div(nights.sum(axis=1).where(nights.sum(axis=1) > 0), axis=0).fillna(0)
    this = shares.loc[run_id] if mine else None
    trailing = shares.drop(index=run_id).mean() if history else None
    result: dict[str, Any] = {
        "labelled": int(sum(mine.values())),
        "counts": dict(sorted(mine.items(), key=lambda kv: (-kv[1], kv[0]))),
        "shares": _rounded(this) if this is not None else {},
        "trailing_nights": len(history),
        "trailing_shares": _rounded(trailing) if trailing is not None else {},
        "uncertain_share": round(uncertain / staged, 4) if staged else None,
        "trailing_uncertain_share": round(sum(e["uncertain"] for e in history) / sum(e["staged"] for e in history), 4)
        if history
        else None,
        "history": [
            {
                "run_id": e["run_id"],
                "window_start": _iso(e["window_start"]),
                "shares": _rounded(shares.loc[e["run_id"]]),
            }
            for e in history
        ],
    }
    if this is not None and trailing is not None:
        delta = (this - trailing).round(4)
        tvd = round(float((this - trailing).abs().sum() / 2), 4)
        result["drift"] = {
            "total_variation": tvd,
            "threshold": DRIFT_THRESHOLD,
            "flagged": tvd > DRIFT_THRESHOLD,
            "delta": {k: float(v) for k, v in delta.sort_values(key=abs, ascending=False).items()},
        }
    return result


def _cost(t, run: sa.Row, model_tickets: int, price: float) -> dict:
    return {
        "price_per_device_hour": price or None,
        "device_hours": round(t.device_seconds / 3600, 6),
        "total": round(price * t.device_seconds / 3600, 6) if price else None,
        "per_1000_tickets": cost_per_1000(t.device_seconds, model_tickets, price),
        # what it would cost if the device were billed only while the model ran (a lower bound)
        "per_1000_tickets_model_time_only": cost_per_1000(run.device_seconds, model_tickets, price),
    }


def _unplanned(run_id: str, step_rows) -> dict[str, Any]:
    """A run that some step recorded but plan never did: it failed before planning."""
    t = timing(step_rows)
    first = min(sp.started_at for sp in step_rows)
    return {
        "run": {"run_id": run_id, "status": "failed before planning", "planned_at": None, "started_at": _iso(first)},
        "steps": _steps(t),
    }


# --- helpers ------------------------------------------------------------------------------------------------


def _rounded(series) -> dict[str, float]:
    return {str(k): round(float(v), 4) for k, v in series.sort_values(ascending=False).items()}


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
