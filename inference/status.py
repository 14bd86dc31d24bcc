"""What an operator wants to see: recent runs, how many results, which failures are still open."""

from __future__ import annotations

import sqlalchemy as sa

from inference.config import Settings
from inference.store import runs
from inference.store.db import check_connection, make_engine
from inference.store.schema import FAILURE_RESOLVED, ticket_failures, ticket_results

RUN_FIELDS = ("run_id", "status", "window_start", "backlog", "succeeded", "failed", "skipped", "shards", "error")


def collect(settings: Settings, limit: int = 10) -> dict:
    engine = make_engine(settings.db_url)
    try:
        check_connection(engine)
        if not sa.inspect(engine).has_table("inference_runs"):
            return {"runs": [], "results": 0, "open_failures": []}
        with engine.connect() as conn:
            recent = [{k: runs.as_dict(r)[k] for k in RUN_FIELDS} for r in runs.recent_runs(conn, limit)]
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


def render(report: dict) -> str:
    lines = [f"results stored: {report['results']}", ""]
    if report["runs"]:
        widths = {k: max(len(k), *(len(str(r[k] or "")) for r in report["runs"])) for k in RUN_FIELDS[:-1]}
        lines.append("  ".join(k.ljust(widths[k]) for k in widths))
        for r in report["runs"]:
            lines.append("  ".join(str(r[k] if r[k] is not None else "").ljust(widths[k]) for k in widths))
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
