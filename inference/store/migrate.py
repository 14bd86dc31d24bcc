"""Versioned schema of our tables (Alembic, `inference/store/migrations/`), and what a run does at start.

The revision a database is at is recorded in the table `inference_alembic_version` (our own name, so it
never collides with another application's `alembic_version` in a shared database).

At the start of a run (`prepare`, through `create_schema`), under one lock (a PostgreSQL advisory lock; on
SQLite the write lock of `BEGIN IMMEDIATE`), so that several processes starting at once do it once:

- none of our tables: they are created at head (every migration, from the first) and the revision recorded.
  This is the only case in which a run writes to the schema;
- anything else not at head: the run refuses to start with `SchemaOutdated` (a PermanentError, so Airflow fails
  the task without retries) naming the recorded and required revisions and `python -m inference db upgrade`.
  Tables with no revision recorded (made by release b508944 or earlier) are checked first, read-only: a shape
  `db upgrade` cannot adopt as revision 0001 is refused with what differs. A revision this code does not know
  means the database is newer than the code, and is refused the same way.

A run never upgrades an existing schema by itself, nor records a revision: a migration can rewrite large tables
(SQLite copies a table to change a column), so it runs when an operator chooses, after a backup, with
`python -m inference db upgrade`; and a run's role needs no more than SELECT on the version table (README,
"Least privilege"). `db upgrade` first records unversioned tables as 0001 (adding the nullable output columns
older releases lacked and making nullable the outputs 4040965 made NOT NULL, what `create_schema` did, or should
have done, in place until now), then migrates.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from inference.errors import ConfigError, SchemaOutdated
from inference.store.batch_tables import BATCH_TABLES
from inference.store.db import writing
from inference.store.schema import OUR_TABLES, SCHEMA_LOCK_KEY

log = logging.getLogger("inference")

VERSION_TABLE = "inference_alembic_version"
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
BASELINE = "0001"  # the schema release b508944 creates, unversioned
COMMAND = "python -m inference db upgrade"
TABLE_NAMES = frozenset(t.name for t in (*OUR_TABLES, *BATCH_TABLES))  # every table the migrations own


def configure_options() -> dict:
    """`context.configure` options shared by env.py and the tests (autogenerate's compare_metadata)."""
    return {
        "version_table": VERSION_TABLE,
        "render_as_batch": True,  # SQLite alters most things by copying the table: batch mode does that
        "include_name": _include_name,
        "include_object": _include_object,
        "compare_type": True,
        "compare_server_default": True,
    }


def _include_name(name, type_, _parent_names) -> bool:
    # Only our tables: not the demo `tickets` table, nor anything else living in the same database.
    return name in TABLE_NAMES if type_ == "table" else True


def _include_object(obj, name, type_, _reflected, _compare_to) -> bool:
    table = obj if type_ == "table" else getattr(obj, "table", None)
    return table is None or table.name in TABLE_NAMES


@functools.cache
def _script():
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR))


def head() -> str:
    return _script().get_current_head()


def revisions() -> list[str]:
    """Every revision this code knows, oldest first."""
    return [s.revision for s in reversed(list(_script().walk_revisions()))]


@dataclass(frozen=True)
class SchemaState:
    current: str | None  # the recorded revision; None when none is recorded
    head: str
    tables: frozenset[str]  # which of our tables exist

    @property
    def empty(self) -> bool:
        return not self.tables

    @property
    def unversioned(self) -> bool:
        return bool(self.tables) and self.current is None

    @property
    def known(self) -> bool:
        return self.current is None or self.current in revisions()

    def problem(self) -> SchemaOutdated | None:
        """Why a run cannot use this database as it is, or None when it can."""
        if self.empty:
            return SchemaOutdated(
                f"the tickets database has none of the inference tables: the first run creates them, or run `{COMMAND}`"
            )
        if self.unversioned:
            return SchemaOutdated(
                "the inference tables were made by an earlier release (b508944 or before) and no schema revision "
                f"is recorded; this code needs revision {self.head}. Runs do not upgrade an existing schema by "
                f"themselves: back the database up, then run `{COMMAND}` (it records them as revision {BASELINE}, "
                "then migrates them)"
            )
        if not self.known:
            return SchemaOutdated(
                f"the tickets database is at schema revision {self.current}, which this code does not know "
                f"(it knows {', '.join(revisions())}): this code is older than the database",
                remedy=(
                    "deploy the release that upgraded the database, or downgrade the database with that release "
                    f"(`python -m inference db downgrade {self.head}`) before running this one"
                ),
            )
        if self.current != self.head:
            return SchemaOutdated(
                f"the tickets database is at schema revision {self.current}; this code needs revision {self.head}. "
                f"Runs do not upgrade an existing schema by themselves: back the database up, then run `{COMMAND}`"
            )
        return None


def _state(conn: sa.Connection) -> SchemaState:
    inspector = sa.inspect(conn)
    present = frozenset(name for name in TABLE_NAMES if inspector.has_table(name))
    heads: list[str] = []
    if inspector.has_table(VERSION_TABLE):  # read directly: cheap, and quiet in every run's log
        version = sa.table(VERSION_TABLE, sa.column("version_num"))
        heads = sorted(conn.execute(sa.select(version.c.version_num)).scalars())
    return SchemaState(current="+".join(heads) or None, head=head(), tables=present)


def state(engine: sa.Engine) -> SchemaState:
    with engine.connect() as conn:
        return _state(conn)


def current(engine: sa.Engine) -> str | None:
    """The revision recorded in the database (None when none is)."""
    return state(engine).current


def check_current(engine: sa.Engine) -> str:
    """Raises SchemaOutdated unless the database is at this code's head revision; returns that revision."""
    found = state(engine)
    problem = found.problem()
    if problem is not None:
        raise problem
    return found.head


@contextlib.contextmanager
def _locked(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One write transaction holding the schema lock: DDL and the version row commit together or not at all."""
    with writing(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
        yield conn


def _command(conn: sa.Connection, name: str, revision: str, **attributes) -> None:
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes.update(attributes, connection=conn)
    try:
        getattr(command, name)(config, revision)
    except CommandError as exc:  # an unknown or ambiguous target revision
        raise ConfigError(
            f"db {name} {revision}: {exc}", remedy=f"give one of {', '.join(revisions())}, head or base"
        ) from None


def _refuse_unknown(found: SchemaState) -> None:
    if not found.known:
        raise found.problem()


def prepare(engine: sa.Engine) -> str:
    """Start of a run: creates our tables in an empty database, else raises SchemaOutdated unless the database
    is at head (tables of an earlier release: after checking, read-only, that `db upgrade` can adopt them).
    Returns the head revision."""
    with _locked(engine) as conn:
        found = _state(conn)
        if found.empty:
            _create(conn, "head")
        elif found.unversioned:
            _adoption(conn)  # raises when their shape is one `db upgrade` cannot adopt
    return check_current(engine)


def upgrade(engine: sa.Engine, revision: str = "head") -> str | None:
    """Migrates to `revision` (default: this code's head); adopts unversioned tables as 0001 first, and
    creates everything in an empty database. Returns the revision recorded afterwards."""
    with _locked(engine) as conn:
        found = _state(conn)
        _refuse_unknown(found)
        if found.empty:
            _create(conn, revision)
        else:
            if found.unversioned:
                _adopt(conn)
            _command(conn, "upgrade", revision)
        return _state(conn).current


def downgrade(engine: sa.Engine, revision: str, *, drop_tables: bool = False) -> str | None:
    """Migrates down to `revision`. Below 0001 (`base`) every table of ours is dropped with its data, which
    is refused unless `drop_tables`. Returns the revision recorded afterwards (None at base)."""
    with _locked(engine) as conn:
        found = _state(conn)
        _refuse_unknown(found)
        if found.empty:
            raise ConfigError(
                "the tickets database has none of the inference tables: there is nothing to downgrade",
                remedy="check TICKETS_DB_URL or --db",
            )
        if found.unversioned:
            _adopt(conn)
        _command(conn, "downgrade", revision, drop_tables=drop_tables)
        return _state(conn).current


def _create(conn: sa.Connection, revision: str) -> None:
    # A version row left behind by tables dropped by hand would make Alembic skip the migrations.
    sa.Table(VERSION_TABLE, sa.MetaData()).drop(conn, checkfirst=True)
    _command(conn, "upgrade", revision)
    log.info("created the inference tables at schema revision %s", _state(conn).current)


def baseline_tables(metadata: sa.MetaData) -> list[sa.Table]:
    """The tables of revision 0001 (the frozen definitions in its migration file)."""
    return _script().get_revision(BASELINE).module.tables(metadata)


def _adoption(conn: sa.Connection) -> tuple[list[sa.Table], list]:
    """What bringing unversioned tables of release b508944 or earlier to revision 0001 takes (read-only), or
    SchemaOutdated if they have a shape no release made. Earlier releases lacked some nullable output columns
    (b508944 added them in place at every start), and 4040965 made the first four outputs NOT NULL."""
    inspector = sa.inspect(conn)
    wanted = baseline_tables(sa.MetaData())
    problems: list[str] = []
    missing: list[sa.Table] = []
    work: list[tuple[sa.Table, list[sa.Column], list[sa.Column], list[sa.Index]]] = []
    for table in wanted:
        if not inspector.has_table(table.name):  # dropped by hand: create_schema recreated it until now
            missing.append(table)
            continue
        present = {c["name"]: c for c in inspector.get_columns(table.name)}
        lacking = [c.name for c in table.columns if c.name not in present and not c.nullable]
        if lacking:
            problems.append(f"{table.name} has no column {', '.join(lacking)}")
            continue
        add = [c for c in table.columns if c.name not in present]
        relax = [c for c in table.columns if c.nullable and c.name in present and not present[c.name]["nullable"]]
        indexes = {ix["name"] for ix in inspector.get_indexes(table.name)}
        work.append((table, add, relax, [ix for ix in table.indexes if ix.name not in indexes]))
    if problems:
        raise SchemaOutdated(
            "the inference tables in the tickets database have a shape no release of this project made, so "
            f"they cannot be upgraded: {'; '.join(problems)}",
            remedy=(
                "bring them to the tables of revision 0001 by hand (inference/store/migrations/versions/"
                "0001_baseline_b508944.py), or drop them if their content can be recomputed, then rerun"
            ),
        )
    return missing, work


def _adopt(conn: sa.Connection) -> None:
    """Unversioned tables of release b508944 or earlier -> revision 0001 (see `_adoption`)."""
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    missing, work = _adoption(conn)
    ops = Operations(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}))
    changed: list[str] = []
    for table in missing:
        table.create(conn)
        changed.append(f"created {table.name}")
    for table, add, relax, indexes in work:
        if add or relax:
            with ops.batch_alter_table(table.name) as batch:
                for column in add:
                    batch.add_column(sa.Column(column.name, column.type, nullable=True))
                for column in relax:
                    batch.alter_column(column.name, existing_type=column.type, nullable=True)
            changed += [f"added {table.name}.{c.name}" for c in add]
            changed += [f"made {table.name}.{c.name} nullable" for c in relax]
        for index in indexes:
            index.create(conn)
            changed.append(f"created index {index.name}")
    ops.migration_context.stamp(_script(), BASELINE)
    log.warning(
        "recorded the inference tables of an earlier release as schema revision %s%s",
        BASELINE,
        f" ({'; '.join(changed)})" if changed else "",
    )
