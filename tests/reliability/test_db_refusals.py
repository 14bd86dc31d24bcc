"""The database refusing writes, for real: a CHECK constraint and a trigger that reject rows carrying ticket
text, on SQLite and on PostgreSQL, and a full filesystem under a SQLite file (a small tmpfs). Every path ends
in one clear line naming the cause and the fix, the run marked failed (or, when even that cannot be written,
by the next run's housekeeping), its staged rows removed once abandoned, and a canary from the ticket text in
no output, log, exception or stored error.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import subprocess
import traceback

import pytest
import sqlalchemy as sa

from inference import cli
from inference.errors import DatabaseFull, DatabaseRefused
from inference.store.db import database_error, make_engine, writing
from inference.store.schema import create_schema, inference_run_items, inference_runs, inference_staging, tickets
from tests.support.tickets import W2

CANARY = "CANARYREFUSE5c2d"
DAY = W2.start.date().isoformat()
N = 6


def _seed_canary_tickets(engine: sa.Engine, n: int = N) -> None:
    """Every sentence carries the canary, so the extractive summary (a ticket's own sentence) does too."""
    at = W2.start + dt.timedelta(hours=3)
    rows = [
        dict(
            ticket_id=k,
            subject=f"{CANARY} refund {k}",
            body=f"{CANARY} I was charged twice this month. {CANARY} Please refund the duplicate payment.",
            created_at=at,
            updated_at=at,
        )
        for k in range(1, n + 1)
    ]
    with writing(engine) as conn:
        conn.execute(sa.insert(tickets), rows)


def _sqlite_add_check(engine: sa.Engine, table: str, check: str) -> None:
    """SQLite cannot add a constraint to a table: rebuild the (empty) table with it."""
    with engine.begin() as conn:
        ddl = conn.execute(sa.text("SELECT sql FROM sqlite_master WHERE name = :t"), {"t": table}).scalar_one()
        conn.exec_driver_sql(f"DROP TABLE {table}")
        conn.exec_driver_sql(ddl.rstrip().rstrip(")") + f", CONSTRAINT ck_no_canary CHECK ({check}))")


def refuse_by_check(engine: sa.Engine) -> str:
    """ticket_results refuses summaries holding the canary (PostgreSQL's error quotes the failing row)."""
    if engine.dialect.name == "sqlite":
        _sqlite_add_check(engine, "ticket_results", f"instr(coalesce(summary, ''), '{CANARY}') = 0")
    else:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "ALTER TABLE ticket_results ADD CONSTRAINT ck_no_canary "
                f"CHECK (strpos(coalesce(summary, ''), '{CANARY}') = 0)"
            )
    return "ck_no_canary"


def refuse_by_trigger(engine: sa.Engine) -> str:
    """ticket_results refuses rows holding the canary; the PostgreSQL trigger even puts the row in its DETAIL."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER tr_no_canary BEFORE INSERT ON ticket_results "
                f"WHEN instr(coalesce(NEW.summary, ''), '{CANARY}') > 0 "
                "BEGIN SELECT RAISE(ABORT, 'results refused by policy'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE OR REPLACE FUNCTION tr_no_canary() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF strpos(coalesce(NEW.summary, ''), '{CANARY}') > 0 THEN "
                "RAISE EXCEPTION 'results refused by policy' USING DETAIL = 'row: ' || NEW.summary; END IF; "
                "RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER tr_no_canary BEFORE INSERT ON ticket_results "
                "FOR EACH ROW EXECUTE FUNCTION tr_no_canary()"
            )
    return "results refused by policy"


REFUSALS = {"check constraint": refuse_by_check, "trigger": refuse_by_trigger}


def _runs(engine: sa.Engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(inference_runs).order_by(inference_runs.c.planned_at)))


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_a_refused_write_is_one_line_naming_the_cause_and_the_fix_never_the_row(db_engine, refusal, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    _seed_canary_tickets(db_engine)
    names = REFUSALS[refusal](db_engine)
    url = db_engine.url.render_as_string(hide_password=False)

    code = cli.main(["--db", url, "run", "--date", DAY])

    out, err = capfd.readouterr()
    everything = out + err + caplog.text
    assert code == cli.EXIT_FAILED
    lines = [ln for ln in err.splitlines() if ln.startswith(("error:", "to fix it:"))]
    assert lines[0].startswith("error: the database refused a write: ") and names in lines[0], err
    assert lines[1] == f"to fix it: {DatabaseRefused.remedy}"
    assert "Traceback" not in err
    assert CANARY not in everything, "ticket text reached the CLI's output or the logs"

    [run] = _runs(db_engine)  # marked failed at once: it does not stay `running`
    assert run.status == "failed" and run.error.startswith("DatabaseRefused: the database refused a write")
    assert CANARY not in run.error
    with db_engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT count(*) FROM ticket_results")) == 0  # all or nothing


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_the_scrubbed_error_is_the_one_raised_and_chained(db_engine, refusal):
    """The library's own exception chain (what a task log shows): the driver's error is scrubbed in place."""
    from inference.pipeline import infer_shard, load_results, plan_run
    from tests.support.tickets import settings_for

    _seed_canary_tickets(db_engine)
    REFUSALS[refusal](db_engine)
    settings = settings_for(db_engine)
    plan_run(settings, "refused", W2)
    with pytest.raises(sa.exc.DBAPIError) as raised:
        infer_shard(settings, "refused", 0)
        load_results(settings, "refused")
    text = "".join(traceback.format_exception(raised.value)) + repr(raised.value) + repr(raised.value.orig)
    assert CANARY not in text
    assert "parameters hidden" in str(raised.value) or "[SQL" in str(raised.value)
    assert isinstance(database_error(raised.value), DatabaseRefused)


# --- a full filesystem -------------------------------------------------------------------------------------


@contextlib.contextmanager
def small_tmpfs(path, size: str):
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"this sandbox does not allow mounting a tmpfs: {mounted.stderr.decode()[:200]}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(path) -> None:
    """Writes a filler file until the filesystem refuses (ENOSPC)."""
    with open(path / "filler", "wb", buffering=0) as fh:  # unbuffered: nothing left to flush at close
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_full_disk_under_sqlite_fails_cleanly_and_the_next_run_cleans_up(tmp_path, capsys, caplog):
    """A run dies mid-way on a full disk (its row stays `running`: not even that can be written); the CLI says
    so in one line; once space is freed, the next run marks the dead run failed and removes its staged rows."""
    from inference.pipeline import infer_shard, load_results, plan_run
    from tests.support.tickets import settings_for

    caplog.set_level(logging.DEBUG)
    with small_tmpfs(tmp_path / "small", "3m") as small:
        url = f"sqlite:///{small / 'tickets.db'}"
        engine = make_engine(url)
        try:
            create_schema(engine, with_demo_source=True)
            _seed_canary_tickets(engine, 40)
            settings = settings_for(engine, chunk_size=8)
            plan_run(settings, "dead-run", W2)
            infer_shard(settings, "dead-run", 0)  # staged; then the disk fills up before load_results
            _fill(small)

            with pytest.raises(sa.exc.OperationalError) as raised:
                load_results(settings, "dead-run")
            assert isinstance(database_error(raised.value), DatabaseFull)
            assert CANARY not in "".join(traceback.format_exception(raised.value))

            code = cli.main(["--db", url, "run", "--date", DAY])
            err = capsys.readouterr().err
            assert code == cli.EXIT_FAILED
            assert "error: the database is full: " in err and f"to fix it: {DatabaseFull.remedy}" in err
            assert "Traceback" not in err and CANARY not in err + caplog.text

            (small / "filler").unlink()  # space freed; two days later, the next night's run
            with writing(engine) as conn:
                r = inference_runs.c
                planned = conn.scalar(sa.select(r.planned_at).where(r.run_id == "dead-run"))
                conn.execute(
                    sa.update(inference_runs).values(planned_at=planned - dt.timedelta(hours=49)).where(r.run_id != "")
                )
                staged_before = conn.scalar(sa.select(sa.func.count()).where(inference_staging.c.run_id == "dead-run"))
                left_running = conn.scalar(sa.select(r.status).where(r.run_id == "dead-run"))
            assert staged_before == 40, "the dead run left its staged rows behind"
            assert left_running == "running", "not even its failure could be written"
            assert cli.main(["--db", url, "run", "--date", DAY]) == 0
            capsys.readouterr()

            with engine.connect() as conn:
                dead = conn.execute(sa.select(inference_runs).where(inference_runs.c.run_id == "dead-run")).one()
                left = conn.scalar(sa.select(sa.func.count()).where(inference_staging.c.run_id == "dead-run"))
                statuses = set(
                    conn.scalars(
                        sa.select(inference_run_items.c.status).where(inference_run_items.c.run_id == "dead-run")
                    )
                )
            assert dead.status == "failed" and dead.error.startswith("abandoned")
            assert left == 0 and "staged" not in statuses
        finally:
            engine.dispose()
