-- Least privilege for the pipeline (README, "Least privilege"): a login role that can read only the five
-- source columns the pipeline uses (and, on a table, the system columns of its row versions) and owns its own tables, in a schema of its own. Nothing else: no other
-- column of the source, no write to it, no other schema, no superuser or CREATEDB.
--
-- Run it as the source table's owner or a superuser, in the tickets database, once the source table exists:
--
--   psql "$OWNER_URL" -v pipeline_role=inference -v pipeline_password="$(openssl rand -hex 24)" \
--        -v source_schema=public -v source_table=tickets -f deploy/postgres-init/20-least-privilege.sql
--
-- Optional: -v pipeline_schema=inference (the schema created for our tables, default inference) and
-- -v source_columns='id, subject, description, created, modified' (when TICKETS_COL_* differ; default below).
-- Then run the pipeline as that role: AIRFLOW_CONN_TICKETS_DB (or TICKETS_DB_URL) with its name and password,
-- and TICKETS_SOURCE_SCHEMA / TICKETS_SOURCE_TABLE set to the source (the role's search_path is its schema).
-- Every step checks these rights at start (inference/store/privileges.py) and names any that is missing.
--
-- In docker-compose.yml this folder is the postgres image's init folder, so the script also runs once when the
-- data volume is created; given no pipeline_role there, it does nothing (the demo source does not exist yet).

\set ON_ERROR_STOP on

\if :{?pipeline_role}
\else
  \echo '20-least-privilege.sql: no pipeline_role given (psql -v pipeline_role=...): nothing to do'
  \quit
\endif
\if :{?pipeline_password}
\else
  DO $$ BEGIN RAISE EXCEPTION 'give the new role a password: psql -v pipeline_password=...'; END $$;
\endif
\if :{?pipeline_schema}
\else
  \set pipeline_schema inference
\endif
\if :{?source_schema}
\else
  \set source_schema public
\endif
\if :{?source_table}
\else
  \set source_table tickets
\endif
\if :{?source_columns}
\else
  \set source_columns 'ticket_id, subject, body, created_at, updated_at'
\endif

SELECT current_database() AS tickets_db \gset

BEGIN;

CREATE ROLE :"pipeline_role" LOGIN PASSWORD :'pipeline_password' NOSUPERUSER NOCREATEDB NOCREATEROLE;

-- Connect, and create temporary tables (bulk writes COPY into them).
GRANT CONNECT, TEMPORARY ON DATABASE :"tickets_db" TO :"pipeline_role";

-- Read the source: its schema, and only the columns the pipeline reads.
GRANT USAGE ON SCHEMA :"source_schema" TO :"pipeline_role";
GRANT SELECT (:source_columns) ON :"source_schema".:"source_table" TO :"pipeline_role";
-- And, on a table, its rows' system columns: infer then knows an unchanged ticket by its row versions instead of
-- reading its text again before writing (README, "Least privilege"). A view has none.
SELECT c.relkind IN ('r', 'p') AS source_is_table FROM pg_class c
 WHERE c.oid = CAST(quote_ident(:'source_schema') || '.' || quote_ident(:'source_table') AS regclass) \gset
\if :source_is_table
  GRANT SELECT (tableoid, ctid, xmin) ON :"source_schema".:"source_table" TO :"pipeline_role";
\endif

-- Own its tables: the first run creates them in this schema, owned by the role (so later runs need no CREATE,
-- and `python -m inference db upgrade` runs as this role too).
CREATE SCHEMA :"pipeline_schema" AUTHORIZATION :"pipeline_role";
ALTER ROLE :"pipeline_role" IN DATABASE :"tickets_db" SET search_path = :"pipeline_schema";

COMMIT;
