"""What a text timestamp column in another shape costs plan (README, "Text timestamps in other shapes").

One source table of N tickets spread over D days, its timestamps stored as `timestamptz`, as ISO-8601 text,
as RFC 2822 text or as day-first numeric text; `plan_run` (a dry run: it reads and judges the window, writes
only the run row) of one day's window, on PostgreSQL and on SQLite. ISO text is narrowed by a text range;
the other shapes are read whole and checked row by row. Each shape in a database of its own; the first plan
of each is a warm-up (not reported).

    python benchmarks/text_time_scan.py --pg-url postgresql+psycopg2://postgres@127.0.0.1:5432/postgres \
        [--tickets 100000] [--days 30] [--repeat 3]

Prints one JSON line per database and shape: tickets in the table, tickets in the window, plan seconds
(each repeat) and the start check's share (counting values that are not plain ISO-8601, and reading them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from inference.bench.scratchdb import scratch_database
from inference.config import Settings, SourceColumns
from inference.options import RunOptions
from inference.pipeline import plan_run
from inference.store.source import Source
from inference.window import window_for_date

DAY0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
# shape -> (PostgreSQL column type, the SQL that writes a timestamptz `t` in it, TICKETS_SOURCE_DATE_ORDER)
PG_SHAPES = {
    "timestamptz": ("TIMESTAMPTZ", "t", None),
    "ISO text": ("TEXT", "to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || '+00:00'", None),
    "RFC 2822 text": ("TEXT", "to_char(t AT TIME ZONE 'UTC', 'Dy, DD Mon YYYY HH24:MI:SS') || ' +0000'", None),
    "day-first text": ("TEXT", "to_char(t AT TIME ZONE 'UTC', 'DD/MM/YYYY HH24:MI:SS')", "dmy"),
}
SQLITE_SHAPES = {  # Python's formatting of the same instants
    "ISO text": (lambda t: t.strftime("%Y-%m-%d %H:%M:%S+00:00"), None),
    "RFC 2822 text": (lambda t: t.strftime("%a, %d %b %Y %H:%M:%S +0000"), None),
    "day-first text": (lambda t: t.strftime("%d/%m/%Y %H:%M:%S"), "dmy"),
}


def _settings(url: str, order: str | None) -> Settings:
    return Settings(
        db_url=url,
        device="cpu",
        cache_dir="",
        heads=("embedding",),
        model_version="bench@text-time",
        source=SourceColumns(table="src", date_order=order),
    )


def _measure(url: str, order: str | None, tickets: int, days: int, repeat: int) -> dict:
    settings = _settings(url, order)
    window = window_for_date((DAY0 + dt.timedelta(days=days // 2)).date())
    engine = sa.create_engine(url)
    try:
        source = Source(engine, settings.source)
        started = time.perf_counter()
        with engine.connect() as conn:
            source.check(conn)
        check_seconds = time.perf_counter() - started
    finally:
        engine.dispose()
    seconds, backlog = [], None
    for n in range(repeat + 1):
        started = time.perf_counter()
        plan_run(settings, f"text-time-{n}", window, RunOptions(dry_run=True))
        if n:  # the first is a warm-up
            seconds.append(round(time.perf_counter() - started, 3))
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            backlog = conn.scalar(sa.text("SELECT backlog FROM inference_runs WHERE run_id = 'text-time-1'"))
    finally:
        engine.dispose()
    return {
        "tickets": tickets,
        "window_tickets": backlog,
        "plan_seconds": seconds,
        "plan_seconds_median": statistics.median(seconds),
        "start_check_seconds": round(check_seconds, 3),
    }


def _pg(admin_url: str, tickets: int, days: int, repeat: int) -> None:
    for shape, (column, write, order) in PG_SHAPES.items():
        with scratch_database(admin_url, "inference_bench_text_time") as url:
            engine = sa.create_engine(url)
            step = days * 86400 / tickets
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(
                        f"CREATE TABLE src (ticket_id BIGINT PRIMARY KEY, subject TEXT, body TEXT, "
                        f"created_at {column}, updated_at {column})"
                    )
                    insert = (  # `write` is one of PG_SHAPES' constants; the values are bound
                        f"INSERT INTO src SELECT i, 'Ticket ' || i, repeat(md5(i::text), 8), {write}, NULL "  # noqa: S608
                        "FROM (SELECT i, CAST(:day0 AS timestamptz) + i * CAST(:step AS float8) * "
                        "interval '1 second' AS t FROM generate_series(1, :n) AS i) AS g"
                    )
                    conn.execute(sa.text(insert), {"day0": DAY0, "step": step, "n": tickets})
                with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.exec_driver_sql("VACUUM (FREEZE, ANALYZE) src")
            finally:
                engine.dispose()
            row = {"database": "postgresql", "shape": shape, **_measure(url, order, tickets, days, repeat)}
            print(json.dumps(row), flush=True)


def _sqlite(tickets: int, days: int, repeat: int) -> None:
    step = dt.timedelta(seconds=days * 86400 / tickets)
    for shape, (write, order) in SQLITE_SHAPES.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "tickets.db"
            with sqlite3.connect(path) as conn:
                conn.execute(
                    "CREATE TABLE src (ticket_id INTEGER PRIMARY KEY, subject TEXT, body TEXT, "
                    "created_at TEXT, updated_at TEXT)"
                )
                conn.executemany(
                    "INSERT INTO src VALUES (?, ?, ?, ?, NULL)",
                    ((i, f"Ticket {i}", f"{i:032x}" * 8, write(DAY0 + i * step)) for i in range(1, tickets + 1)),
                )
            row = {"database": "sqlite", "shape": shape, **_measure(f"sqlite:///{path}", order, tickets, days, repeat)}
            print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", required=True, help="admin URL of a PostgreSQL server (scratch databases)")
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    _pg(args.pg_url, args.tickets, args.days, args.repeat)
    _sqlite(args.tickets, args.days, args.repeat)


if __name__ == "__main__":
    main()
