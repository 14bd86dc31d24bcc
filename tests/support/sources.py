"""Source tables shaped like real help-desk databases, built for real with each dialect's own DDL (views over
joins, untyped SQLite columns, text timestamps, no primary key...), and the pipeline run over them with the
stand-in encoder (tests/integration/test_source_shapes.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence

import sqlalchemy as sa

from inference.config import Settings, SourceColumns
from inference.engine.standin import StandInEncoder
from inference.errors import RunFailed
from inference.options import RunOptions
from inference.pipeline import run_window
from inference.predictor import Predictor, build_predictor
from inference.store.db import writing
from inference.store.schema import inference_run_items, inference_runs, ticket_failures, ticket_results
from inference.textprep import content_hash
from inference.window import Window

VERSION = "standin@shapes"


class Shapes:
    """Creates source tables and views in a test's database (either dialect) and drops them at the end."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.pg = engine.dialect.name == "postgresql"
        self.made: list[tuple[str, str]] = []

    def ts(self) -> str:
        """The usual timestamp column type: timestamptz on PostgreSQL, ISO text on SQLite."""
        return "TIMESTAMP WITH TIME ZONE" if self.pg else "TEXT"

    def sql(self, *statements: str) -> None:
        with writing(self.engine) as conn:
            for statement in statements:  # psycopg2 formats even without parameters: a literal % is %%
                conn.exec_driver_sql(statement.replace("%", "%%") if self.pg else statement)

    def table(self, name: str, columns: str) -> str:
        self.drop(name)
        self.sql(f"CREATE TABLE {name} ({columns})")
        self.made.append(("TABLE", name))
        return name

    def view(self, name: str, select: str) -> str:
        self.drop(name)
        self.sql(f"CREATE VIEW {name} AS {select}")
        self.made.append(("VIEW", name))
        return name

    def tickets_table(self, name: str = "src", id_type: str | None = None, ts: str | None = None) -> str:
        id_type = id_type if id_type is not None else "BIGINT" if self.pg else "INTEGER"
        ts = ts or self.ts()
        return self.table(name, f"ticket_id {id_type}, subject TEXT, body TEXT, created_at {ts}, updated_at {ts}")

    def insert(self, name: str, rows: Sequence[dict]) -> None:
        """Rows as given: values reach the driver untouched (text stays text, numbers numbers)."""
        if not rows:
            return
        table = sa.table(name, *[sa.column(c) for c in rows[0]])
        with writing(self.engine) as conn:
            conn.execute(sa.insert(table), [self._value_row(r) for r in rows])

    def _value_row(self, row: dict) -> dict:
        if self.pg:
            return row
        # SQLite: datetimes as the ISO text another application would write
        return {k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in row.items()}

    def drop(self, name: str) -> None:
        cascade = " CASCADE" if self.pg else ""
        with writing(self.engine) as conn:
            for kind in ("VIEW", "TABLE"):
                with contextlib.suppress(sa.exc.DBAPIError):
                    with conn.begin_nested():
                        statement = f"DROP {kind} IF EXISTS {name}{cascade}"
                        conn.exec_driver_sql(statement.replace("%", "%%") if self.pg else statement)

    def close(self) -> None:
        for _kind, name in reversed(self.made):
            self.drop(name)


def ticket(ticket_id, subject: str | None, body: str | None, at: dt.datetime, updated: dt.datetime | None = ...):
    return dict(
        ticket_id=ticket_id, subject=subject, body=body, created_at=at, updated_at=at if updated is ... else updated
    )


def settings(engine: sa.Engine, table: str = "src", *, columns: dict | None = None, **overrides) -> Settings:
    """Settings for a source table of this database: the embedding head only (the shapes are about the
    source, not the outputs), a fixed model version, small chunks so a few tickets span several."""
    url = engine.url.render_as_string(hide_password=False)
    source = SourceColumns(table=table, **(columns or {}))
    values = dict(
        db_url=url,
        device="cpu",
        chunk_size=4,
        cache_dir="",
        heads=("embedding",),
        model_version=VERSION,
        source=source,
    )
    values.update(overrides)
    return Settings(**values)


def predictor(settings: Settings, encoder: StandInEncoder | None = None) -> Predictor:
    return build_predictor(settings, encoder or StandInEncoder(), settings.model_version)


def run(settings: Settings, run_id: str, window: Window, options: RunOptions | None = None, model=None) -> dict:
    """The whole run; a run that fails its reconciliation or failure rate returns its summary too."""
    try:
        return run_window(settings, run_id, window, options, predictor=model or predictor(settings))
    except RunFailed as failed:
        return failed.summary


def results(engine: sa.Engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def items(engine: sa.Engine, run_id: str) -> dict[str, tuple[str, str | None]]:
    i = inference_run_items.c
    with engine.connect() as conn:
        rows = conn.execute(sa.select(i.ticket_id, i.status, i.reason).where(i.run_id == run_id))
        return {r.ticket_id: (r.status, r.reason) for r in rows}


def failures(engine: sa.Engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(ticket_failures).order_by(ticket_failures.c.ticket_id)))


def run_rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table(inference_runs.name):
            return 0
        return conn.scalar(sa.select(sa.func.count()).select_from(inference_runs)) or 0


def digest(subject: str | None, body: str | None) -> str:
    return content_hash(subject, body)


def with_source(settings: Settings, **changes) -> Settings:
    return dataclasses.replace(settings, source=dataclasses.replace(settings.source, **changes))


@contextlib.contextmanager
def database_of_its_own(admin_url: str, prefix: str, timezone: str | None = None) -> Iterator[str]:
    """A fresh PostgreSQL database (optionally with its own default time zone), dropped at the end."""
    from inference.bench.scratchdb import scratch_database

    with scratch_database(admin_url, prefix) as url:
        if timezone:
            name = sa.make_url(url).database
            admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
            try:
                with admin.connect() as conn:
                    conn.exec_driver_sql(f"ALTER DATABASE \"{name}\" SET timezone TO '{timezone}'")
            finally:
                admin.dispose()
        yield url
