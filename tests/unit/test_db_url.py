"""The PostgreSQL driver: bulk writes use psycopg2's COPY. SQLAlchemy 2.1 reads a bare postgresql:// URL as
psycopg 3 when that is installed (Airflow installs it), which has no copy_expert: a bare URL means psycopg2
here, and a URL naming another driver is refused with the fix, not an AttributeError in the middle of plan."""

from __future__ import annotations

import pytest

from inference.errors import ConfigError
from inference.store.db import make_engine


@pytest.mark.parametrize("url", ["postgresql://u:p@db.invalid/tickets", "postgresql+psycopg2://u:p@db.invalid/t"])
def test_a_bare_or_psycopg2_url_uses_psycopg2(url):
    engine = make_engine(url)  # no connection is made
    assert (engine.dialect.driver, engine.url.drivername) == ("psycopg2", "postgresql+psycopg2")
    assert engine.url.password == "p"


@pytest.mark.parametrize("driver", ["psycopg", "pg8000", "asyncpg"])
def test_another_driver_is_refused_with_the_fix(driver):
    with pytest.raises(ConfigError, match=r"postgresql\+psycopg2://") as refused:
        make_engine(f"postgresql+{driver}://u:secret@db.invalid/tickets")
    assert "secret" not in str(refused.value)
