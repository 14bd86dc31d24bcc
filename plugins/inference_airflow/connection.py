"""The tickets database: the Airflow connection `tickets_db` when defined, else TICKETS_DB_URL.

A `postgres` connection goes through the Postgres provider's own hook (`PostgresHook.sqlalchemy_url`): login,
password, host, port, the connection's *schema* field as the database (Airflow's naming), the extras
`sqlalchemy_query` and `sqlalchemy_scheme`, and IAM tokens, all handled the way every other Airflow task
handles them. The libpq options the hook passes to the driver from the extra (`sslmode`, `sslrootcert`,
`connect_timeout`, `options`, ...) go into the URL's query, so our engine connects exactly as the hook's
`get_conn` would. The driver defaults to psycopg2 (the bulk writes use its COPY); an extra `sqlalchemy_scheme`
chooses another. Any connection type may instead hold a whole SQLAlchemy URL in its extra as `sqlalchemy_url`;
a `sqlite` connection names the file in its host.
"""

from __future__ import annotations

from inference.errors import ConfigError

CONN_ID = "tickets_db"
DEFAULT_SCHEME = "postgresql+psycopg2"
# libpq connection parameters the hook forwards from the extra; others (the hook's own switches) are not.
LIBPQ_KEYS = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslcrl",
        "sslpassword",
        "sslnegotiation",
        "connect_timeout",
        "application_name",
        "options",
        "target_session_attrs",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "gssencmode",
        "channel_binding",
        "service",
        "passfile",
    }
)


class ConnectionTypeError(ConfigError):
    """The `tickets_db` connection is of a type this pipeline cannot use."""


def url_from_connection(conn) -> str:
    """A SQLAlchemy URL from an Airflow connection (postgres through PostgresHook, sqlite, or `sqlalchemy_url`)."""
    extra = conn.extra_dejson or {}
    if extra.get("sqlalchemy_url"):
        return str(extra["sqlalchemy_url"])
    conn_type = (conn.conn_type or "").lower()
    if conn_type in ("postgres", "postgresql"):
        return _postgres_url(conn, extra)
    if conn_type == "sqlite":
        return f"sqlite:///{conn.host}"
    raise ConnectionTypeError(
        f"connection {CONN_ID!r} has type {conn_type!r}: use a postgres or sqlite connection, "
        "or put a SQLAlchemy URL in its extra field as 'sqlalchemy_url'"
    )


def _postgres_url(conn, extra: dict) -> str:
    try:
        from airflow.providers.postgres.hooks.postgres import PostgresHook
    except ImportError:
        raise ConfigError(
            f"connection {CONN_ID!r} is a postgres connection, which needs the Postgres provider: "
            "pip install apache-airflow-providers-postgres (the project's airflow extra installs it)"
        ) from None
    # The connection already resolved (secrets backend, environment, metadata DB) is handed over: no second lookup.
    scheme = extra.get("sqlalchemy_scheme") or DEFAULT_SCHEME
    hook = PostgresHook(postgres_conn_id=conn.conn_id, connection=conn, sqlalchemy_scheme=scheme)
    url = hook.sqlalchemy_url
    query = dict(url.query)
    for key, value in extra.items():
        if key in LIBPQ_KEYS and key not in query and key not in hook.ignored_extra_options:
            query[key] = str(value)
    return url.set(query=query).render_as_string(hide_password=False)


def tickets_db_url() -> str | None:
    """None when the connection is not defined (the caller falls back to TICKETS_DB_URL)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = Connection.get(CONN_ID)
    except AirflowNotFoundException:
        return None
    return url_from_connection(conn)
