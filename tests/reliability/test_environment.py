"""Environment faults at start: fail before writing anything, with a message that says what to fix."""

from __future__ import annotations

import logging
import traceback

import pytest
import sqlalchemy as sa

from inference import cli
from inference.config import Settings
from inference.modelinfo import ModelUnavailable
from inference.pipeline import RunOptions, finish_run, infer_shard, load_results, plan_run, retry_failed, run_window
from inference.store.db import DatabaseUnavailable
from inference.store.schema import OUR_TABLES
from tests.support.tickets import W2, add_ticket

PASSWORD = "S3cretCanary"
STEPS = {
    "run_window": lambda s: run_window(s, "run-env", W2),
    "plan_run": lambda s: plan_run(s, "run-env", W2, RunOptions()),
    "infer_shard": lambda s: infer_shard(s, "run-env", 0),
    "load_results": lambda s: load_results(s, "run-env"),
    "retry_failed": lambda s: retry_failed(s, "run-env"),
    "finish_run": lambda s: finish_run(s, "run-env"),
}


def _our_tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names()) & {t.name for t in OUR_TABLES}


@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_missing_model_directory_fails_before_sqlite_is_even_created(tmp_path, step):
    db_file = tmp_path / "fresh" / "tickets.db"
    settings = Settings(db_url=f"sqlite:///{db_file}", model_dir="/nonexistent", device="cpu")

    with pytest.raises(ModelUnavailable, match="INFERENCE_MODEL") as raised:
        STEPS[step](settings)

    assert "/nonexistent" in str(raised.value)
    assert not db_file.exists() and not db_file.parent.exists()  # not even an empty database file


def test_a_missing_model_directory_fails_before_postgresql_gets_a_table(pg_engine):
    add_ticket(pg_engine, 1, "Refund", "I was charged twice.")
    with pg_engine.begin() as conn:
        for table in reversed(OUR_TABLES):
            conn.execute(sa.text(f"DROP TABLE {table.name}"))
    assert _our_tables(pg_engine) == set()
    url = pg_engine.url.render_as_string(hide_password=False)

    with pytest.raises(ModelUnavailable, match="INFERENCE_MODEL"):
        run_window(Settings(db_url=url, model_dir="/nonexistent", device="cpu"), "run-env", W2)

    assert _our_tables(pg_engine) == set()  # no run row, no tables at all


@pytest.mark.parametrize(
    ("files", "complaint"),
    [
        ({}, "no config.json"),
        ({"config.json": "{}", "pytorch_model.bin": "pickled"}, "no \\*.safetensors"),  # never unpickled
    ],
)
def test_an_unusable_model_directory_fails_before_anything_is_written(tmp_path, files, complaint):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for name, text in files.items():
        (model_dir / name).write_text(text)
    db_file = tmp_path / "tickets.db"

    with pytest.raises(ModelUnavailable, match=complaint):
        run_window(Settings(db_url=f"sqlite:///{db_file}", model_dir=str(model_dir), device="cpu"), "run-env", W2)
    assert not db_file.exists()


UNREACHABLE = {"nothing listens": "127.0.0.1:1", "no such role": None}  # None: the session's own server


@pytest.fixture(params=sorted(UNREACHABLE))
def unreachable_url(request) -> str:
    """A URL with a password that cannot connect: no server, or the session's server with an unknown role."""
    where = UNREACHABLE[request.param]
    if where is None:
        server = sa.make_url(request.getfixturevalue("pg_admin_url"))
        where = f"{server.host}:{server.port or 5432}"
    return f"postgresql+psycopg2://svc:{PASSWORD}@{where}/x"


def _assert_secret_free(exc: BaseException, caplog) -> None:
    text = "".join(traceback.format_exception(exc))  # the whole chain, as a task log would show it
    assert PASSWORD not in text and PASSWORD not in repr(exc)
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("step", sorted(STEPS))
def test_an_unreachable_database_says_what_to_fix_without_the_password(unreachable_url, step, caplog):
    url = unreachable_url
    caplog.set_level(logging.DEBUG)
    settings = Settings(db_url=url, device="cpu")
    assert PASSWORD not in repr(settings)

    with pytest.raises(DatabaseUnavailable) as raised:
        STEPS[step](settings)

    message = str(raised.value)
    assert "TICKETS_DB_URL" in message and "tickets_db" in message  # what to fix, CLI and Airflow
    assert "svc@127.0.0.1" in message or "svc:***@127.0.0.1" in message  # which database it tried
    _assert_secret_free(raised.value, caplog)


def test_the_cli_reports_an_unreachable_database_without_the_password(capsys, caplog):
    url = f"postgresql+psycopg2://svc:{PASSWORD}@{UNREACHABLE['nothing listens']}/x"
    code = cli.main(["--db", url, "run", "--date", "2026-11-30"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILED
    assert "TICKETS_DB_URL" in err
    assert PASSWORD not in out + err + caplog.text


def test_a_sqlite_file_that_is_not_a_database_is_reported_as_unavailable(tmp_path):
    db_file = tmp_path / "tickets.db"
    db_file.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(DatabaseUnavailable, match="TICKETS_DB_URL"):
        plan_run(Settings(db_url=f"sqlite:///{db_file}", device="cpu"), "run-env", W2)
    assert db_file.read_bytes() == b"this is not a database\n" * 200


def test_an_impossible_sqlite_path_is_reported_as_unavailable(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the database directory should be")
    settings = Settings(db_url=f"sqlite:///{blocker / 'tickets.db'}", device="cpu")
    with pytest.raises(DatabaseUnavailable, match="TICKETS_DB_URL"):
        plan_run(settings, "run-env", W2)
