"""Several first starts at once on a new SQLite file: turning it to WAL needs the file's exclusive lock, and
SQLite answers "database is locked" at once, without its busy handler, to a connection that races another
doing the same. The connect hook waits for the lock (as long as busy_timeout would) instead of failing the
start. These tests hold the lock from a second real connection; the busy handler is switched off on the
waiting one, so only the hook's own wait can get it through."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from inference.store import db


def _holder(path):
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN EXCLUSIVE")
    return conn


def _waiter(path):
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=0")
    return conn


def test_wal_waits_for_a_lock_another_start_holds(tmp_path):
    path = tmp_path / "tickets.db"
    holder = _holder(path)
    waiter = _waiter(path)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        waiter.execute("PRAGMA journal_mode=WAL")  # what a start did before the wait
    threading.Timer(0.3, holder.rollback).start()
    db._set_wal(waiter.cursor())
    assert waiter.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    holder.close()
    waiter.close()


def test_wal_gives_up_after_busy_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(db, "SQLITE_BUSY_MS", 200)
    path = tmp_path / "tickets.db"
    holder = _holder(path)
    waiter = _waiter(path)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        db._set_wal(waiter.cursor())
    holder.rollback()
    holder.close()
    waiter.close()


def test_other_errors_are_not_waited_on():
    class Cursor:
        calls = 0

        def execute(self, _sql):
            self.calls += 1
            raise sqlite3.OperationalError("disk I/O error")

    cur = Cursor()
    with pytest.raises(sqlite3.OperationalError, match="I/O"):
        db._set_wal(cur)
    assert cur.calls == 1


def test_engines_open_in_wal(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'tickets.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == db.SQLITE_BUSY_MS
    engine.dispose()
