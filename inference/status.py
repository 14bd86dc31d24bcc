"""What an operator wants to see: recent runs (window, duration, tokens, throughput, and runs that failed before
plan recorded them), how many results, which failures are still open."""

from __future__ import annotations

import sqlalchemy as sa

from inference.config import Settings
from inference.report.timing import per_second, spans, timing
from inference.store import metrics, runs
from inference.store.db import check_connection, make_engine
from inference.store.schema import FAILURE_RESOLVED, ticket_failures, ticket_results

RUN_FIELDS = ("run_id", "status", "window_start", "backlog", "succeeded", "failed", "skipped", "shards", "error")
COLUMNS = (
    "run_id",
    "status",
    "window",
    "duration",
    "backlog",
    "succeeded",
    "failed",
    "skipped",
    "shards",
    "tokens",
    "tickets/s",
)


def collect(settings: Settings, limit: int = 10) -> dict:
    engine = make_engine(settings.db_url)
    try:
        check_connection(engine)
        if not sa.inspect(engine).has_table("inference_runs"):
            return {"runs": [], "results": 0, "open_failures": []}
        with engine.connect() as conn:
            recent = [_run(conn, r) for r in runs.recent_runs(conn, limit)]
            if sa.inspect(conn).has_table("inference_steps"):
                recent += [_unplanned(r) for r in metrics.runs_without_plan(conn, limit)]
            recent = sorted(recent, key=lambda r: r["started"] or "", reverse=True)[:limit]
            results = conn.scalar(sa.select(sa.func.count()).select_from(ticket_results))
            f = ticket_failures.c
            open_failures = [
                {"status": status, "error_class": error_class, "tickets": n}
                for status, error_class, n in conn.execute(
                    sa.select(f.status, f.error_class, sa.func.count(sa.distinct(f.ticket_id)))
                    .where(f.status != FAILURE_RESOLVED)
                    .group_by(f.status, f.error_class)
                    .order_by(f.status, f.error_class)
                )
            ]
        return {"runs": recent, "results": results, "open_failures": open_failures}
    finally:
        engine.dispose()


def _run(conn: sa.Connection, row: sa.Row) -> dict:
    out = {k: runs.as_dict(row)[k] for k in RUN_FIELDS}
    t = timing(spans(metrics.steps(conn, row.run_id))) if sa.inspect(conn).has_table("inference_steps") else None
    model_tickets = metrics.model_tickets(conn, row.run_id)
    out.update(
        window_end=row.window_end.isoformat(),
        started=row.planned_at.isoformat(),
        finished_at=row.finished_at.isoformat() if row.finished_at else None,
        duration_seconds=round((row.finished_at - row.planned_at).total_seconds(), 1) if row.finished_at else None,
        real_tokens=int(row.real_tokens),
        model_wall_seconds=round(t.model_wall_seconds, 3) if t else None,
        tickets_per_second=per_second(model_tickets, t.model_wall_seconds) if t else None,
        tokens_per_second=per_second(row.real_tokens, t.model_wall_seconds) if t else None,
    )
    return out


def _unplanned(row: sa.Row) -> dict:
    """A run a step recorded but plan never did (it failed before planning): no window, no counts."""
    out = dict.fromkeys(RUN_FIELDS)
    finished = row.finished_at
    out.update(
        run_id=row.run_id,
        status="failed before planning",
        error=row.error,
        window_end=None,
        started=row.started_at.isoformat(),
        finished_at=finished.isoformat() if finished else None,
        duration_seconds=round((finished - row.started_at).total_seconds(), 1) if finished else None,
        real_tokens=None,
        model_wall_seconds=None,
        tickets_per_second=None,
        tokens_per_second=None,
    )
    return out


def _cells(r: dict) -> dict[str, str]:
    def num(v) -> str:
        return "" if v is None else f"{v:,}"

    window = ""
    if r["window_start"]:
        window = f"{r['window_start'][:16].replace('T', ' ')} .. {(r['window_end'] or '')[:16].replace('T', ' ')}"
    from inference.pipeline.progress import duration

    return {
        "run_id": r["run_id"],
        "status": r["status"],
        "window": window,
        "duration": duration(r["duration_seconds"]) if r["duration_seconds"] is not None else "",
        "backlog": num(r["backlog"]),
        "succeeded": num(r["succeeded"]),
        "failed": num(r["failed"]),
        "skipped": num(r["skipped"]),
        "shards": num(r["shards"]),
        "tokens": num(r["real_tokens"]),
        "tickets/s": num(r["tickets_per_second"]),
    }


def render(report: dict) -> str:
    lines = [f"results stored: {report['results']}", ""]
    if report["runs"]:
        cells = [_cells(r) for r in report["runs"]]
        widths = {k: max(len(k), *(len(c[k]) for c in cells)) for k in COLUMNS}
        lines.append("  ".join(k.ljust(widths[k]) for k in COLUMNS).rstrip())
        for r, c in zip(report["runs"], cells, strict=True):
            lines.append("  ".join(c[k].ljust(widths[k]) for k in COLUMNS).rstrip())
            if r["error"]:
                lines.append(f"    error: {r['error']}")
    else:
        lines.append("no runs yet")
    lines.append("")
    if report["open_failures"]:
        lines.append("open failures (tickets):")
        lines.extend(f"  {f['status']:<12} {f['error_class']:<16} {f['tickets']}" for f in report["open_failures"])
    else:
        lines.append("no open failures")
    return "\n".join(lines)
