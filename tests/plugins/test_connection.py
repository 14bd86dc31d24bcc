"""Airflow connection -> SQLAlchemy URL, with Airflow's own Connection class."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from airflow.sdk import Connection

from inference_airflow.connection import ConnectionTypeError, url_from_connection


def test_postgres_connection_keeps_credentials_exact():
    conn = Connection(
        conn_id="tickets_db",
        conn_type="postgres",
        host="db.internal",
        login="svc",
        password="p@ss:w/rd#?",
        port=6432,
        schema="tickets",
        extra=json.dumps({"sslmode": "require", "unrelated": "x"}),
    )
    url = sa.make_url(url_from_connection(conn))
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+psycopg2",
        "svc",
        "p@ss:w/rd#?",
        "db.internal",
        6432,
        "tickets",
    )
    assert dict(url.query) == {"sslmode": "require"}


def test_uri_form_as_in_airflow_conn_env_var():
    conn = Connection.from_uri("postgresql://svc:secret@db:5432/tickets", conn_id="tickets_db")
    url = sa.make_url(url_from_connection(conn))
    assert (url.username, url.password, url.host, url.database) == ("svc", "secret", "db", "tickets")


def test_sqlite_and_explicit_sqlalchemy_url():
    assert url_from_connection(Connection(conn_id="t", conn_type="sqlite", host="/data/t.db")) == "sqlite:////data/t.db"
    explicit = Connection(conn_id="t", conn_type="generic", extra=json.dumps({"sqlalchemy_url": "sqlite:///x.db"}))
    assert url_from_connection(explicit) == "sqlite:///x.db"


def test_unsupported_connection_type_says_what_to_do():
    with pytest.raises(ConnectionTypeError, match="postgres or sqlite.*sqlalchemy_url"):
        url_from_connection(Connection(conn_id="t", conn_type="mysql", host="h"))


# --- the Postgres provider's hook with a real connection to a real server ------------------------------------


def test_a_postgres_connection_goes_through_the_providers_hook_to_a_real_server(pg_url, monkeypatch):
    """AIRFLOW_CONN_TICKETS_DB as an operator defines it (JSON, the database in Airflow's `schema` field, libpq
    options and `sqlalchemy_query` in the extra): the URL is PostgresHook.sqlalchemy_url's, and the engine our
    steps use connects with every one of those settings."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    from inference.store.db import make_engine
    from inference_airflow.connection import tickets_db_url

    target = sa.make_url(pg_url)
    conn = {
        "conn_type": "postgres",
        "host": target.host,
        "port": target.port,
        "login": target.username,
        "password": "unused-with-trust-auth",
        "schema": target.database,
        "extra": {
            "sslmode": "disable",
            "options": "-c search_path=custom_path,public",
            "sqlalchemy_query": {"application_name": "from-sqlalchemy-query"},
            "cursor": "dictcursor",  # a hook switch, not a libpq option: not passed on
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_TICKETS_DB", json.dumps(conn))
    url = sa.make_url(tickets_db_url())

    hook_url = PostgresHook(postgres_conn_id="tickets_db", sqlalchemy_scheme="postgresql+psycopg2").sqlalchemy_url
    assert (url.drivername, url.host, url.port, url.database, url.username) == (
        hook_url.drivername,
        hook_url.host,
        hook_url.port,
        hook_url.database,
        hook_url.username,
    )
    assert dict(url.query) == {
        "application_name": "from-sqlalchemy-query",
        "sslmode": "disable",
        "options": "-c search_path=custom_path,public",
    }
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        with engine.connect() as c:
            database, app, path, tz = c.execute(
                sa.text(
                    "SELECT current_database(), current_setting('application_name'), "
                    "current_setting('search_path'), current_setting('TimeZone')"
                )
            ).one()
    finally:
        engine.dispose()
    assert (database, app, path, tz) == (target.database, "from-sqlalchemy-query", "custom_path,public", "UTC")


def test_the_connection_may_choose_its_driver_through_the_hooks_extra(monkeypatch):
    from inference_airflow.connection import tickets_db_url

    monkeypatch.setenv(
        "AIRFLOW_CONN_TICKETS_DB",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "db",
                "schema": "support",
                "extra": {"sqlalchemy_scheme": "postgresql+psycopg"},
            }
        ),
    )
    assert sa.make_url(tickets_db_url()).drivername == "postgresql+psycopg"
    monkeypatch.delenv("AIRFLOW_CONN_TICKETS_DB")
    assert tickets_db_url() is None  # not defined: the caller falls back to TICKETS_DB_URL
