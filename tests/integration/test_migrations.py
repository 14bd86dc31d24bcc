"""Schema migrations (inference/store/migrate.py, inference/store/migrations/) on SQLite and a real PostgreSQL.

Old releases' tables are built for real by their own schema modules, frozen verbatim under legacy_schemas/
(`git show b508944:inference/store/schema.py`, and 4040965's, whose outputs were NOT NULL), with rows in every
table; each test works in a database of its own.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from inference.cli import main as cli
from inference.config import Settings
from inference.errors import PermanentError, SchemaOutdated
from inference.pipeline import plan_run
from inference.store import migrate, schema
from inference.store.db import make_engine, writing
from inference.window import window_for_date

LEGACY = Path(__file__).with_name("legacy_schemas")
ROOT = Path(__file__).resolve().parents[2]
HEAD = migrate.head()
T0 = dt.datetime(2026, 11, 20, 3, 0, tzinfo=dt.UTC)


def legacy(release: str):
    """The schema module of an old release, loaded from its frozen copy (its own MetaData and tables)."""
    spec = importlib.util.spec_from_file_location(
        f"legacy_schema_{release}_{uuid.uuid4().hex}", LEGACY / f"schema_{release}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request, tmp_path):
    """An empty database of this test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tickets.db'}"
        return
    admin_url = request.getfixturevalue("pg_admin_url")
    name = f"inference_migrations_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def engine(empty_url):
    engine = make_engine(empty_url)
    yield engine
    engine.dispose()


def fill(engine: sa.Engine, old) -> None:
    """Rows in every table of an old release's schema module, through its own Table objects."""
    outputs = {c.name for c in old.ticket_results.columns}
    staged_outputs = {c.name for c in old.inference_staging.columns}
    result = dict(
        model_id="all-MiniLM-L6-v2",
        model_version="v1",
        content_hash="h" * 64,
        source_updated_at=T0,
        embedding=b"\x00\x00\x80?" * 4,
        embedding_dim=4,
        category="billing",
        category_score=0.75,
        category_confidence=0.62,
        category_uncertain=False,
        summary="Charged twice — émoji 🙂 kept.",
        truncated=False,
        input_tokens=17,
        run_id="run-1",
        created_at=T0,
        updated_at=T0,
    )
    with writing(engine) as conn:
        conn.execute(
            old.ticket_results.insert(),
            [{k: v for k, v in dict(result, ticket_id=t).items() if k in outputs | {"ticket_id"}} for t in ("1", "2")],
        )
        conn.execute(
            old.ticket_failures.insert(),
            [
                dict(
                    run_id="run-1",
                    ticket_id="3",
                    attempt=2,
                    content_hash="f" * 64,
                    model_version="v1",
                    error_class="nan_output",
                    retryable=True,
                    status="pending",
                    message="non-finite output",
                    created_at=T0,
                    updated_at=T0,
                )
            ],
        )
        conn.execute(
            old.inference_runs.insert(),
            [
                dict(
                    run_id="run-1",
                    window_start=T0,
                    window_end=T0 + dt.timedelta(days=1),
                    model_version="v1",
                    status="succeeded",
                    options={"reprocess": False, "limit": None},
                    backlog=3,
                    succeeded=2,
                    failed=1,
                    planned_at=T0,
                    finished_at=T0 + dt.timedelta(minutes=5),
                )
            ],
        )
        conn.execute(
            old.inference_run_items.insert(),
            [
                dict(run_id="run-1", ticket_id=t, shard=0, est_tokens=20, content_hash="h" * 64, status=s, reason=r)
                for t, s, r in (("1", "succeeded", None), ("2", "succeeded", None), ("3", "failed", "nan_output"))
            ],
        )
        conn.execute(
            old.inference_staging.insert(),
            [
                {
                    k: v
                    for k, v in dict(result, run_id="run-2", ticket_id="4", source_updated_at=T0, created_at=T0).items()
                    if k in staged_outputs
                }
            ],
        )


def snapshot(engine: sa.Engine) -> dict[str, list[dict]]:
    """Every row of our tables as plain values, keyed by table, in key order (reflected: any schema)."""
    reflected = sa.MetaData()
    reflected.reflect(engine, only=lambda name, _: name in migrate.TABLE_NAMES)
    rows = {}
    with engine.connect() as conn:
        for name, table in reflected.tables.items():
            key = [c for c in table.primary_key.columns] or list(table.columns)
            found = conn.execute(sa.select(table).order_by(*key)).mappings()
            rows[name] = [{k: _plain(v) for k, v in r.items()} for r in found]
    return rows


def _plain(value):
    if isinstance(value, dt.datetime):  # SQLite reflects naive UTC text; PostgreSQL timestamptz
        return value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def as_before(after: dict[str, list[dict]], before: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """`after` seen through the tables and columns `before` had (a column that went missing raises)."""
    return {t: [{k: r[k] for k in rows[0]} for r in after[t]] for t, rows in before.items()}


def schema_diff(engine: sa.Engine) -> list:
    """What autogenerate would write to bring the database to the metadata: nothing, when they agree."""
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn, opts=migrate.configure_options()), schema.metadata)


def version_rows(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT version_num FROM {migrate.VERSION_TABLE}")).scalars())


def db(url: str, *args: str) -> int:
    return cli(["--db", url, "db", *args])


def test_head_is_the_last_revision_and_history_is_linear():
    assert migrate.revisions() == ["0001", "0002", "0003", "0004", "0005", "0006"]
    assert HEAD == "0006"


def test_upgrade_from_b508944_with_data_then_down_and_up(empty_url, engine, capsys):
    old = legacy("b508944")
    old.create_schema(engine)  # what the current release does on its first run
    fill(engine, old)
    before = snapshot(engine)
    assert sorted(before) == sorted(t.name for t in old.OUR_TABLES)
    assert all(before.values()), "a table without rows proves nothing"

    with pytest.raises(SchemaOutdated) as refused:  # the nightly run with this code: refuses, writes nothing
        schema.create_schema(engine)
    assert "`python -m inference db upgrade`" in str(refused.value)
    assert snapshot(engine) == before and not sa.inspect(engine).has_table(migrate.VERSION_TABLE)

    assert db(empty_url, "current") == 0
    out = capsys.readouterr().out
    assert "database: none recorded" in out and "python -m inference db upgrade" in out

    assert db(empty_url, "upgrade") == 0
    assert f"none -> {HEAD}" in capsys.readouterr().out
    assert version_rows(engine) == [HEAD]
    after = snapshot(engine)
    assert [r["embedding_dim"] for r in after["inference_staging"]] == [None]
    assert after["inference_batches"] == after["inference_batch_requests"] == []
    assert after["inference_chunks"] == after["inference_steps"] == []
    assert as_before(after, before) == before
    assert schema_diff(engine) == []

    assert db(empty_url, "current") == 0
    assert f"database: {HEAD}" in capsys.readouterr().out

    assert db(empty_url, "downgrade", "0001") == 0
    assert migrate.current(engine) == "0001"
    assert snapshot(engine) == before  # b508944's own shape and rows again
    old.create_schema(engine)  # and b508944 itself runs on it (nothing missing, nothing in its way)

    assert db(empty_url, "upgrade") == 0
    assert migrate.current(engine) == HEAD
    assert as_before(snapshot(engine), before) == before
    assert schema_diff(engine) == []


def nullable(engine: sa.Engine, table: str) -> dict[str, bool]:
    return {c["name"]: c["nullable"] for c in sa.inspect(engine).get_columns(table)}


@pytest.mark.parametrize("history", [["4040965"], ["4040965", "b508944"]])
def test_older_release_tables_are_refused_at_start_then_adopted_by_db_upgrade(empty_url, engine, history):
    """4040965 had NOT NULL outputs and lacked three; b508944 then added those in place at its start."""
    first = legacy(history[0])
    first.create_schema(engine)
    fill(engine, first)
    for release in history[1:]:
        legacy(release).create_schema(engine)
    before = snapshot(engine)

    with pytest.raises(SchemaOutdated) as refused:
        schema.create_schema(engine)  # a run starting with this code
    assert "no schema revision is recorded" in str(refused.value) and f"needs revision {HEAD}" in str(refused.value)
    assert "`python -m inference db upgrade`" in str(refused.value)
    assert migrate.current(engine) is None and snapshot(engine) == before  # a run writes nothing
    assert nullable(engine, "ticket_results")["embedding"] is False

    assert db(empty_url, "upgrade") == 0
    assert migrate.current(engine) == HEAD
    assert all(nullable(engine, "ticket_results")[c] for c in ("embedding", "embedding_dim", "category", "summary"))
    upgraded = snapshot(engine)
    assert as_before(upgraded, before) == before  # every value kept
    assert upgraded["ticket_results"][0]["summary"] is None  # a column 4040965 lacked: NULL
    assert schema_diff(engine) == []
    schema.create_schema(engine)  # now the run starts


def test_tables_of_another_shape_are_refused_untouched(engine):
    with writing(engine) as conn:
        conn.execute(sa.text("CREATE TABLE ticket_results (ticket_id VARCHAR(128) PRIMARY KEY, score FLOAT)"))
    with pytest.raises(SchemaOutdated) as refused:
        schema.create_schema(engine)
    assert "ticket_results has no column model_id" in str(refused.value)
    inspector = sa.inspect(engine)
    assert inspector.get_table_names() == ["ticket_results"]  # nothing created, no version recorded
    assert [c["name"] for c in inspector.get_columns("ticket_results")] == ["ticket_id", "score"]


def test_the_migrations_alone_make_exactly_the_metadata(engine):
    """What catches a head module declaring a column no migration adds (runs would add it in place)."""
    assert migrate.upgrade(engine) == HEAD
    assert schema_diff(engine) == []


def test_run_items_leave_room_for_heap_only_updates_from_0006(engine):
    """A shard's claim and settle must not write index entries: no updated column indexed, and on PostgreSQL
    pages with room for the new versions (fillfactor 60); a downgrade restores 0005's index."""
    pg = engine.dialect.name == "postgresql"

    def shape() -> tuple[dict, list | None]:
        with engine.connect() as conn:
            indexes = {i["name"]: i["column_names"] for i in sa.inspect(conn).get_indexes("inference_run_items")}
            options = None
            if pg:
                options = conn.scalar(sa.text("SELECT reloptions FROM pg_class WHERE relname = 'inference_run_items'"))
        return indexes, options

    migrate.upgrade(engine)
    indexes, options = shape()
    assert indexes == {"ix_run_items_shard": ["run_id", "shard", "ticket_id"]}
    assert options == (["fillfactor=60"] if pg else None)
    assert db(engine.url.render_as_string(hide_password=False), "downgrade", "0005") == 0
    indexes, options = shape()
    assert indexes == {"ix_run_items_shard_status": ["run_id", "shard", "status"]}
    assert options is None


def test_empty_database_is_created_at_head_on_first_run(engine):
    schema.create_schema(engine)
    assert version_rows(engine) == [HEAD]
    assert set(sa.inspect(engine).get_table_names()) == migrate.TABLE_NAMES | {migrate.VERSION_TABLE}
    assert schema_diff(engine) == []
    schema.create_schema(engine, with_demo_source=True)  # later starts: nothing to do but the demo table
    assert version_rows(engine) == [HEAD]
    assert migrate.check_current(engine) == HEAD


def test_a_table_dropped_by_hand_is_recreated_at_start(engine):
    schema.create_schema(engine)
    with writing(engine) as conn:
        conn.execute(sa.text("DROP TABLE inference_staging"))
    schema.create_schema(engine)
    assert schema_diff(engine) == []


def test_nightly_start_refuses_an_outdated_schema_and_leaves_it_alone(empty_url, engine):
    migrate.upgrade(engine, "0001")
    fill(engine, legacy("b508944"))
    before = snapshot(engine)

    settings = Settings(db_url=empty_url)
    with pytest.raises(SchemaOutdated) as refused:
        plan_run(settings, "run-9", window_for_date(dt.date(2026, 11, 20)))
    message = str(refused.value)
    assert "revision 0001" in message and f"needs revision {HEAD}" in message
    assert "`python -m inference db upgrade`" in message
    assert "python -m inference db upgrade" in refused.value.remedy
    assert isinstance(refused.value, PermanentError)
    assert migrate.current(engine) == "0001" and snapshot(engine) == before  # no run row, no upgrade


def test_the_airflow_adapter_fails_an_outdated_schema_without_retry(engine):
    """plugins/inference_airflow/tasks.py: a PermanentError becomes AirflowFailException (no retries)."""
    from airflow.sdk.exceptions import AirflowFailException

    from inference_airflow.tasks import _no_retry_for_permanent

    migrate.upgrade(engine, "0001")
    start = _no_retry_for_permanent(lambda: schema.create_schema(engine))
    with pytest.raises(AirflowFailException) as failed:
        start()
    assert isinstance(failed.value.__cause__, SchemaOutdated)
    assert "SchemaOutdated" in str(failed.value) and "python -m inference db upgrade" in str(failed.value)


def test_a_database_newer_than_the_code_is_refused(empty_url, engine, capsys):
    schema.create_schema(engine)
    with writing(engine) as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '0099'"))

    with pytest.raises(SchemaOutdated) as refused:
        schema.create_schema(engine)
    assert "0099" in str(refused.value) and "this code is older than the database" in str(refused.value)
    assert "downgrade" in refused.value.remedy

    assert db(empty_url, "upgrade") == 1
    assert db(empty_url, "downgrade", "0001") == 1
    assert "this code is older than the database" in capsys.readouterr().err
    assert version_rows(engine) == ["0099"]


def test_cli_refuses_what_would_lose_data_or_is_unknown(empty_url, engine, capsys):
    schema.create_schema(engine)
    fill(engine, schema)
    assert db(empty_url, "downgrade", "base") == 2
    assert "--drop-tables" in capsys.readouterr().err
    assert db(empty_url, "upgrade", "0007") == 2
    assert "0007" in capsys.readouterr().err
    assert migrate.current(engine) == HEAD and snapshot(engine)["ticket_results"]

    assert db(empty_url, "downgrade", "base", "--drop-tables") == 0
    assert sa.inspect(engine).get_table_names() == [migrate.VERSION_TABLE]
    assert version_rows(engine) == []
    schema.create_schema(engine)  # and the next start creates them again
    assert version_rows(engine) == [HEAD]


def test_db_upgrade_is_a_command(empty_url, engine):
    done = subprocess.run(
        [sys.executable, "-m", "inference", "--db", empty_url, "db", "upgrade"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"none -> {HEAD}" in done.stdout
    assert migrate.current(engine) == HEAD


START_TOGETHER = textwrap.dedent(
    """
    import sys, time
    from inference.store.db import make_engine
    from inference.store.schema import create_schema
    engine = make_engine(sys.argv[1])
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    create_schema(engine)
    """
)


def test_concurrent_first_starts_create_once(empty_url, engine):
    at = time.time() + 8  # after every process has imported the library
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START_TOGETHER, empty_url, str(at)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [rc for rc, _ in results] == [0] * 4, [err[-1500:] for _, err in results]
    assert version_rows(engine) == [HEAD]
    assert schema_diff(engine) == []
