"""Alembic environment. `inference.store.migrate` runs it on a connection it has already locked and opened a
transaction on (config.attributes["connection"]); the whole migration then commits or rolls back as one.
From the `alembic` command line (developers) it connects to `-x db=URL` or TICKETS_DB_URL instead.
"""

from __future__ import annotations

from alembic import context

from inference.store.migrate import VERSION_TABLE, configure_options
from inference.store.schema import metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, **configure_options())
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
elif context.is_offline_mode():
    raise SystemExit(f"offline (--sql) mode is not supported; the version table is {VERSION_TABLE}")
else:
    from inference.config import settings_from_env
    from inference.store.db import make_engine, writing

    url = context.get_x_argument(as_dictionary=True).get("db") or settings_from_env().db_url
    engine = make_engine(url)
    try:
        with writing(engine) as conn:
            _run(conn)
    finally:
        engine.dispose()
