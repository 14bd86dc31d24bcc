"""The tickets database: the Airflow connection `tickets_db` when defined, else TICKETS_DB_URL."""

from __future__ import annotations

from inference.errors import ConfigError

CONN_ID = "tickets_db"
_QUERY_KEYS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name")


class ConnectionTypeError(ConfigError):
    """The `tickets_db` connection is of a type this pipeline cannot use."""


def url_from_connection(conn) -> str:
    """A SQLAlchemy URL from an Airflow connection (postgres or sqlite, or extra `sqlalchemy_url`)."""
    from sqlalchemy import URL

    extra = conn.extra_dejson or {}
    if extra.get("sqlalchemy_url"):
        return str(extra["sqlalchemy_url"])
    conn_type = (conn.conn_type or "").lower()
    if conn_type in ("postgres", "postgresql"):
        return URL.create(
            "postgresql+psycopg2",
            username=conn.login or None,
            password=conn.password or None,
            host=conn.host or None,
            port=conn.port or None,
            database=conn.schema or None,
            query={k: str(v) for k, v in extra.items() if k in _QUERY_KEYS},
        ).render_as_string(hide_password=False)
    if conn_type == "sqlite":
        return f"sqlite:///{conn.host}"
    raise ConnectionTypeError(
        f"connection {CONN_ID!r} has type {conn_type!r}: use a postgres or sqlite connection, "
        "or put a SQLAlchemy URL in its extra field as 'sqlalchemy_url'"
    )


def tickets_db_url() -> str | None:
    """None when the connection is not defined (the caller falls back to TICKETS_DB_URL)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = Connection.get(CONN_ID)
    except AirflowNotFoundException:
        return None
    return url_from_connection(conn)
