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
