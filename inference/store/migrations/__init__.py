"""Alembic migrations of this project's tables (driven by `inference.store.migrate`, no alembic.ini needed).

`versions/` holds one file per revision; `env.py` runs them on the connection `migrate` hands it, or, from the
`alembic` command line (developers: `alembic -c inference/store/migrations/alembic.ini revision ...`), on
TICKETS_DB_URL or `-x db=URL`.
"""
