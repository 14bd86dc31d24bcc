"""Shared fixtures: a real PostgreSQL (found or started), SQLite, the real model, an Airflow home.

PostgreSQL, in order: INFERENCE_TEST_PG_URL (an admin URL), the server on 127.0.0.1:5432, a throwaway
cluster started from the local PostgreSQL binaries. Each test session creates its own database and
drops it at the end. With none of these, the session fails with instructions (never skips).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Airflow reads its configuration at import: point it at a private home before anything imports it.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="inference-tests-airflow-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for name in list(os.environ):  # a developer's shell must not redirect the tests
    if name.startswith(("INFERENCE_", "TICKETS_")) and name != "INFERENCE_TEST_PG_URL":
        del os.environ[name]
sys.path.insert(0, str(ROOT / "plugins"))

INSTALL_HINT = (
    "The integration tests need PostgreSQL and found none: no server answered on 127.0.0.1:5432 and no "
    "initdb/pg_ctl binaries were found. Install it (Debian/Ubuntu: `apt-get install postgresql`; macOS: "
    "`brew install postgresql`), start the local server, or set INFERENCE_TEST_PG_URL to an admin URL "
    "such as postgresql+psycopg2://postgres@localhost:5432/postgres."
)


def _answers(url: str) -> bool:
    import sqlalchemy as sa

    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def _pg_bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    dirs += sorted(glob.glob("/usr/local/opt/postgresql*/bin")) + ["/opt/homebrew/bin", "/usr/local/bin"]
    for d in dirs:
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _ThrowawayCluster:
    """initdb + pg_ctl in a temporary directory, as pytest-postgresql does."""

    def __init__(self, bindir: Path):
        self.bindir, self.port = bindir, _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="inference-tests-pg-"))
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the postgres user
            shutil.chown(self.dir, "postgres")
            self.prefix = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> str:
        data = self.dir / "data"
        self._run(str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l", str(self.dir / "log"), "start")
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, str(self.bindir / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_admin_url():
    explicit = os.environ.get("INFERENCE_TEST_PG_URL")
    if explicit:
        if not _answers(explicit):
            pytest.fail(f"INFERENCE_TEST_PG_URL is set but the server does not answer. {INSTALL_HINT}")
        yield explicit
        return
    for url in (
        "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres",
        "postgresql+psycopg2://root@127.0.0.1:5432/test",
    ):
        if _answers(url):
            yield url
            return
    bindir = _pg_bindir()
    if bindir is None:
        pytest.fail(INSTALL_HINT)
    cluster = _ThrowawayCluster(bindir)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_url(pg_admin_url):
    """A database of this test session's own, dropped at the end."""
    import sqlalchemy as sa

    name = f"inference_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _reset(engine) -> None:
    from inference.store.schema import create_schema, metadata

    metadata.drop_all(engine)
    create_schema(engine, with_demo_source=True)


@pytest.fixture
def pg_engine(pg_url):
    from inference.store.db import make_engine

    engine = make_engine(pg_url)
    _reset(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'tickets.db'}"


@pytest.fixture
def sqlite_engine(sqlite_url):
    from inference.store.db import make_engine

    engine = make_engine(sqlite_url)
    _reset(engine)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_engine(request):
    """The same test against both supported dialects."""
    return request.getfixturevalue("sqlite_engine" if request.param == "sqlite" else "pg_engine")


@pytest.fixture(scope="session")
def model():
    """The real bundled MiniLM, loaded once per session."""
    from inference.config import Settings
    from inference.modelinfo import model_version
    from inference.pipeline import compute

    settings = Settings(device="cpu")
    return compute.load(settings, model_version(settings))


@pytest.fixture(scope="session")
def airflow_db():
    """A migrated Airflow metadata database (SQLite) in the session's private AIRFLOW_HOME."""
    started = time.monotonic()
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(
            f"airflow db migrate failed ({time.monotonic() - started:.0f}s):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return _AIRFLOW_HOME
