"""Throwaway PostgreSQL databases on a server given by an admin URL: the benchmark's parts and the test
sessions each work in one of their own, so runs sharing a server never see each other's tables."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import sqlalchemy as sa


def unique_name(prefix: str) -> str:
    """`prefix_<pid>_<8 hex>`: unique per process and call; the pid tells whose database it was."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def create_database(admin_url: str, name: str, template: str | None = None) -> str:
    """CREATE DATABASE `name` (a copy of `template` when given); returns its URL (the admin URL with the
    database swapped)."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    finally:
        admin.dispose()
    return sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    """DROP DATABASE .. WITH (FORCE): connections still open (a killed worker's) do not keep it alive."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def database_exists(admin_url: str, name: str) -> bool:
    admin = sa.create_engine(admin_url)
    try:
        with admin.connect() as conn:
            return bool(conn.scalar(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}))
    finally:
        admin.dispose()


@contextlib.contextmanager
def scratch_database(admin_url: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A fresh database for the block (a copy of `template` when given), dropped afterwards; yields its URL."""
    name = unique_name(prefix)
    url = create_database(admin_url, name, template)
    try:
        yield url
    finally:
        drop_database(admin_url, name)
