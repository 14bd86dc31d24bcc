"""Least privilege: before a step reads or writes anything, ask PostgreSQL whether the role it connects as has
every right the pipeline uses, and name what is missing together with the GRANT that adds it.

What the pipeline needs (README, "Least privilege"):

- SELECT on the source table's columns it reads (ticket ID, subject, body, created and updated times), and USAGE
  on that table's schema. Nothing else of the source: no other column, no INSERT/UPDATE/DELETE.
- Its own tables (ticket_results, ticket_failures, inference_runs, inference_run_items, inference_staging):
  SELECT, INSERT, UPDATE and DELETE on each, plus USAGE on the sequence of a serial column (ticket_failures.id;
  an identity column needs none). Tables that do not exist yet are created at start: that needs CREATE on the
  schema they go into (the first schema of the role's search_path; owning them then gives every right).
- SELECT on the schema revision table (`read_only`) when it exists: runs read it, only `db upgrade` writes it.
- TEMPORARY on the database: bulk writes COPY into per-connection temporary tables (store/bulk.py).

The server answers with has_*_privilege(), which covers ownership, role membership and PUBLIC grants, so the check
agrees with what the statements would do. Messages carry role, database, schema, table and column names only.
SQLite (and any other dialect) has no privileges to check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from inference.config import SourceColumns, quoted_name
from inference.errors import ConfigError

REMEDY = (
    "run the GRANT statements in the message as the owner of those objects or a superuser "
    "(README, 'Least privilege'), then rerun"
)
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")
_RELKINDS = ("r", "p", "v", "m", "f")  # tables, partitioned tables, views, materialized views, foreign tables


@dataclass(frozen=True)
class Missing:
    """One missing right: what (`privilege`), on which object (`on`), and the statement that grants it."""

    privilege: str
    on: str
    grant: str

    def __str__(self) -> str:
        return f"{self.privilege} on {self.on}"


def check_privileges(
    engine: sa.Engine,
    source_columns: SourceColumns,
    our_tables: Iterable[sa.Table],
    *,
    read_only: Iterable[str] = (),
) -> None:
    """Raises ConfigError naming every missing privilege (and its GRANT); returns when nothing is missing.

    `our_tables` need SELECT, INSERT, UPDATE and DELETE (or CREATE on their schema while absent); `read_only`
    names tables next to the unqualified ones that a run only reads when they exist (the schema revision)."""
    if engine.dialect.name != "postgresql":
        return
    with engine.connect() as conn:
        who = _whoami(conn)
        missing = missing_privileges(conn, source_columns, list(our_tables), list(read_only), who=who)
    if missing:
        raise ConfigError(
            f"role {who.role} lacks privileges the pipeline needs in database {who.database}: "
            + "; ".join(str(m) for m in missing)
            + ". Grant them (as the objects' owner or a superuser): "
            + " ".join(m.grant for m in missing),
            remedy=REMEDY,
        )


@dataclass(frozen=True)
class _Who:
    role: str  # quoted, as it goes into a GRANT
    database: str  # quoted
    temporary: bool
    default_schema: str | None  # where unqualified CREATE TABLE goes; None when no usable schema
    search_path: tuple[str, ...]  # the setting's schemas, usable or not


def _whoami(conn: sa.Connection) -> _Who:
    row = conn.execute(
        sa.text(
            "SELECT quote_ident(current_user), quote_ident(current_database()), "
            "has_database_privilege(current_database(), 'TEMPORARY'), current_schema(), "
            "current_setting('search_path'), current_user"
        )
    ).one()
    return _Who(*row[:4], search_path=_parse_search_path(row[4], row[5]))


def missing_privileges(
    conn: sa.Connection,
    source: SourceColumns,
    our_tables: list[sa.Table],
    read_only: list[str] = (),
    *,
    who: _Who | None = None,
) -> list[Missing]:
    """Every privilege the current role lacks, in a stable order: database, source, our tables."""
    who = who or _whoami(conn)
    missing: list[Missing] = []
    if not who.temporary:
        missing.append(
            Missing(
                "TEMPORARY", f"database {who.database}", f"GRANT TEMPORARY ON DATABASE {who.database} TO {who.role};"
            )
        )
    missing += _source(conn, source, who)
    missing += _ours(conn, our_tables, list(read_only), who)
    return list(dict.fromkeys(missing))


# --------------------------------------------------------------------------------------------------------------
# The source table
# --------------------------------------------------------------------------------------------------------------


def _source(conn: sa.Connection, cols: SourceColumns, who: _Who) -> list[Missing]:
    """USAGE on its schema and SELECT on the columns read. Unqualified, the table is looked up along the
    search_path setting itself: the server's own lookup skips schemas without USAGE, which would turn a missing
    USAGE into "no such table"."""
    wanted = cols.read
    schemas = [cols.schema] if cols.schema else list(who.search_path)
    rows = conn.execute(
        sa.text(
            "SELECT n.nspname, quote_ident(n.nspname), has_schema_privilege(n.oid, 'USAGE'), "
            "quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname, quote_ident(a.attname), "
            "has_column_privilege(c.oid, a.attnum, 'SELECT') "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE n.nspname = ANY(:schemas) AND c.relname = :name AND c.relkind = ANY(:kinds) "
            "AND a.attname = ANY(:columns)"
        ),
        {"schemas": schemas, "name": cols.table, "kinds": list(_RELKINDS), "columns": wanted},
    ).all()
    by_schema: dict[str, list] = {}
    for row in rows:
        by_schema.setdefault(row[0], []).append(row)
    first = next((name for name in schemas if name in by_schema), None)
    if first is None:
        return []  # no such table (or none of the columns): Source says which setting to fix
    found = by_schema[first]
    _, qschema, usage, qname = found[0][:4]
    missing = (
        [] if usage else [Missing("USAGE", f"schema {qschema}", f"GRANT USAGE ON SCHEMA {qschema} TO {who.role};")]
    )
    quoted = {r[4]: r[5] for r in found}
    readable = {r[4]: r[6] for r in found}
    lacking = [quoted[name] for name in wanted if name in quoted and not readable[name]]
    # Columns the table does not have are Source's to report (set the TICKETS_COL_* variables).
    if lacking:
        every = ", ".join(quoted[name] for name in wanted if name in quoted)
        missing.append(
            Missing(
                "SELECT",
                f"{'column' if len(lacking) == 1 else 'columns'} {', '.join(lacking)} of source table {qname}",
                f"GRANT SELECT ({every}) ON {qname} TO {who.role};",
            )
        )
    return missing


def _parse_search_path(setting: str, user: str) -> tuple[str, ...]:
    """The schemas of a search_path setting, `$user` expanded (unquoted names fold to lower case)."""
    out = []
    for item in re.findall(r'"(?:[^"]|"")*"|[^,\s]+', setting):
        name = item[1:-1].replace('""', '"') if item.startswith('"') else item.lower()
        out.append(user if name == "$user" else name)
    return tuple(out)


# --------------------------------------------------------------------------------------------------------------
# Our tables
# --------------------------------------------------------------------------------------------------------------


def _ours(conn: sa.Connection, tables: list[sa.Table], read_only: list[str], who: _Who) -> list[Missing]:
    """Unqualified tables are where the server finds them: the first schema of the search_path that has them
    (looked up along the setting itself, as for the source); absent ones go where CREATE TABLE puts them."""
    needs: dict[tuple[str | None, str], tuple[str, ...]] = {(t.schema, t.name): TABLE_PRIVILEGES for t in tables}
    optional = {(None, name) for name in read_only if (None, name) not in needs}
    needs.update(dict.fromkeys(optional, ("SELECT",)))
    searched = list(dict.fromkeys([*(s for s, _ in needs if s), *who.search_path]))
    rows = conn.execute(
        sa.text(
            "SELECT n.nspname, quote_ident(n.nspname), has_schema_privilege(n.oid, 'USAGE'), "
            "has_schema_privilege(n.oid, 'CREATE'), c.relname, c.oid, quote_ident(c.relname), "
            "has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'), "  # as in TABLE_PRIVILEGES
            "has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'DELETE') "
            "FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = ANY(:names) "
            "AND c.relkind IN ('r', 'p') WHERE n.nspname = ANY(:schemas)"
        ),
        {"names": sorted({name for _, name in needs}), "schemas": searched},
    ).all()
    schemas = {r[0]: r[1:4] for r in rows}  # name -> (quoted, usage, create)
    found = {(r[0], r[4]): r[5:] for r in rows if r[4] is not None}  # (schema, table) -> (oid, quoted, rights...)

    located: list[tuple[str, tuple[str, ...], tuple]] = []  # (schema, privileges needed, found row)
    absent: dict[str, list[str]] = {}
    for (schema, name), wanted in needs.items():
        where = next((s for s in ([schema] if schema else who.search_path) if (s, name) in found), None)
        if where is not None:
            located.append((where, wanted, found[where, name]))
        elif (schema, name) not in optional:  # optional ones are made with the others, or by `db upgrade`
            absent.setdefault(schema or _create_schema(who, schemas), []).append(name)

    missing: list[Missing] = []
    for name in dict.fromkeys([*(where for where, _, _ in located), *absent]):
        if name not in schemas:
            raise ConfigError(
                f"schema {name} for the pipeline's tables does not exist: create it "
                f"(`CREATE SCHEMA {quoted_name(name)} AUTHORIZATION {who.role};`)",
                remedy=REMEDY,
            )
        qschema, usage, create = schemas[name]
        if not usage:
            missing.append(Missing("USAGE", f"schema {qschema}", f"GRANT USAGE ON SCHEMA {qschema} TO {who.role};"))
        if name in absent and not create:
            missing.append(
                Missing(
                    "CREATE",
                    f"schema {qschema} (to create the missing table(s) {', '.join(absent[name])})",
                    f"GRANT CREATE ON SCHEMA {qschema} TO {who.role};",
                )
            )
    for where, wanted, (_, qtable, *rights) in located:
        lacking = [p for p, ok in zip(TABLE_PRIVILEGES, rights, strict=True) if p in wanted and not ok]
        if lacking:
            privileges, qname = ", ".join(lacking), f"{schemas[where][0]}.{qtable}"
            missing.append(Missing(privileges, f"table {qname}", f"GRANT {privileges} ON {qname} TO {who.role};"))
    missing += _sequences(conn, [row[0] for _, wanted, row in located if "INSERT" in wanted], who)
    return missing


def _create_schema(who: _Who, schemas: dict) -> str:
    """Where an unqualified CREATE TABLE goes: the first schema of the search_path the role may use, else the
    first that exists (to say USAGE is missing there)."""
    name = who.default_schema or next((s for s in who.search_path if s in schemas), None)
    if name is None:
        raise ConfigError(
            f"no schema of the search_path ({', '.join(who.search_path) or 'empty'}) exists for the pipeline's "
            f"tables: create one (`CREATE SCHEMA inference AUTHORIZATION {who.role};`) and make it the role's "
            f"first (`ALTER ROLE {who.role} SET search_path = inference;`)",
            remedy=REMEDY,
        )
    return name


def _sequences(conn: sa.Connection, table_oids: list[int], who: _Who) -> list[Missing]:
    """Serial columns (pg_depend deptype 'a') call nextval() with the caller's rights; identity columns do not.
    (CASE: the planner may evaluate a WHERE condition before the join that keeps only sequences.)"""
    if not table_oids:
        return []
    rows = conn.execute(
        sa.text(
            "SELECT quote_ident(sn.nspname) || '.' || quote_ident(s.relname), "
            "CASE WHEN s.relkind = 'S' THEN has_sequence_privilege(s.oid, 'USAGE') END FROM pg_depend d "
            "JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S' JOIN pg_namespace sn ON sn.oid = s.relnamespace "
            "WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a' "
            "AND d.refobjid = ANY(CAST(:oids AS oid[])) ORDER BY 1"
        ),
        {"oids": table_oids},
    ).all()
    return [
        Missing("USAGE", f"sequence {qseq}", f"GRANT USAGE ON SEQUENCE {qseq} TO {who.role};")
        for qseq, usable in rows
        if not usable
    ]
