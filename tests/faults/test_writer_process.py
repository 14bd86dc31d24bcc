"""infer_shard with its chunk transactions in a writer process (INFERENCE_WRITER=process), on PostgreSQL with
the real model: the same results as the write-behind thread; nothing lost or doubled when the writer dies, when
the shard process dies, or when the database refuses a write; no ticket text in the error that crosses over."""

from __future__ import annotations

import datetime as dt
import os
import pickle
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.engine.encoder import Encoder
from inference.errors import DatabaseRefused
from inference.pipeline import finish_run, infer_shard, load_results, plan_run
from inference.pipeline.writer_process import WriterDied, _error_payload
from inference.store.db import writing
from inference.store.schema import inference_chunks, tickets
from inference.window import window_for_date

WINDOW = window_for_date(dt.date(2026, 11, 30))
OUTPUTS = ("content_hash", "model_version", "embedding", "category", "category_confidence", "summary", "truncated")


def _outputs(view) -> dict[str, tuple]:
    return {t: tuple(r[k] for k in OUTPUTS) for t, r in view.results().items()}


def _chunk_seqs(engine, run_id: str) -> list[tuple[str, int, int]]:
    c = inference_chunks.c
    stmt = sa.select(c.step, c.seq, c.tickets).where(c.run_id == run_id).order_by(c.step_started_at, c.seq)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(stmt)]


def _writers(pid: int) -> list[int]:
    """Live writer processes started by `pid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid and state != "Z" and b"inference.pipeline.writer_process" in cmdline:
                out.append(int(entry.name))
    return out


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture
def planned(pg_settings, add_tickets):
    """planned(run_id, n, chunk): n tickets seeded and planned as one shard; (settings with the writer process,
    the ticket IDs)."""

    def plan(run_id: str, n: int, chunk: int):
        ids = add_tickets(n)
        settings = pg_settings(chunk_size=chunk, writer="process")
        plan_run(settings, run_id, WINDOW)
        return settings, ids

    return plan


def _all_loaded(settings, view, run_id: str, ids: list[str]) -> None:
    load_results(settings, run_id)
    summary = finish_run(settings, run_id)
    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", len(ids), 0)
    results, source = view.results(), view.source_hashes()
    assert sorted(results) == sorted(ids)  # one row per ticket (ticket_id is the key)
    assert {t: r["content_hash"] for t, r in results.items()} == {t: source[t] for t in ids}


def test_the_writer_process_loads_exactly_what_the_write_behind_thread_loads(
    planned, pg_settings, view, model, pg_engine
):
    n, chunk = 45, 10
    by_process, ids = planned("run-process", n, chunk)
    totals = infer_shard(by_process, "run-process", 0, predictor=model, load=True)
    assert (totals.staged, totals.loaded, totals.failed, totals.skipped) == (n, n, 0, 0)
    assert set(view.statuses("run-process").values()) == {"succeeded"}
    assert view.staging("run-process") == {}, "loaded in the chunk's transaction, never staged"
    written = _outputs(view)
    assert sorted(written) == sorted(ids)
    # one metrics row per chunk, numbered 1.. in order, as the thread numbers them
    assert _chunk_seqs(pg_engine, "run-process") == [
        ("infer_shard", k + 1, min(chunk, n - k * chunk)) for k in range(5)
    ]
    _all_loaded(by_process, view, "run-process", ids)

    view.forget_results()  # the same tickets again, with the write-behind thread
    by_thread = pg_settings(chunk_size=chunk)
    plan_run(by_thread, "run-thread", WINDOW)
    infer_shard(by_thread, "run-thread", 0, predictor=model, load=True)
    assert _outputs(view) == written
    assert _chunk_seqs(pg_engine, "run-thread") == _chunk_seqs(pg_engine, "run-process")


def test_a_killed_writer_fails_the_shard_and_its_retry_finishes_without_loss_or_duplicates(
    planned, view, model, monkeypatch
):
    n, chunk = 80, 10
    settings, ids = planned("run-writer-killed", n, chunk)
    real_forward, passes = Encoder.forward, []

    def forward(self, *args, **kwargs):  # the parent runs the model: kill its writer once two chunks are in
        passes.append(1)
        if len(passes) > 1:
            time.sleep(0.05)
        counts = view.item_counts("run-writer-killed")
        if counts.get("succeeded", 0) >= 2 * chunk and not getattr(forward, "killed", False):
            (writer,) = _writers(os.getpid())
            os.kill(writer, signal.SIGKILL)
            forward.killed = True
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(Encoder, "forward", forward)
    with pytest.raises(WriterDied, match="exit code -9"):
        infer_shard(settings, "run-writer-killed", 0, predictor=model, load=True)
    assert getattr(forward, "killed", False), "the writer was never killed: the test did not test anything"
    assert _writers(os.getpid()) == [], "the dead writer was waited for"

    at_failure = view.items("run-writer-killed")
    done = {t for t, (status, _, _) in at_failure.items() if status == "succeeded"}
    claimed = {t for t, (status, _, attempts) in at_failure.items() if status == "planned" and attempts == 1}
    assert len(done) >= 2 * chunk and len(done) % chunk == 0, "only whole chunks commit"
    assert claimed, "the chunks handed to the dead writer were claimed, not lost"
    assert {a for t, (_, _, a) in at_failure.items() if t not in done | claimed} == {0}
    assert set(view.results()) == done, "results and item states commit together"

    monkeypatch.setattr(Encoder, "forward", real_forward)
    totals = infer_shard(settings, "run-writer-killed", 0, predictor=model, load=True)  # the task's retry
    assert totals.loaded == n - len(done), "the retry computes exactly what was not committed"
    after = view.items("run-writer-killed")
    assert {status for status, _, _ in after.values()} == {"succeeded"}
    assert {t: after[t][2] for t in claimed} == dict.fromkeys(claimed, 2), "claimed items redone once more"
    _all_loaded(settings, view, "run-writer-killed", ids)


def test_sigkill_of_the_shard_process_ends_its_writer_and_the_retry_finishes(
    planned, shard_worker, read_worker_log, view, model
):
    n, chunk = 100, 10
    settings, ids = planned("run-parent-killed", n, chunk)
    proc = shard_worker(settings, "run-parent-killed", 0, forward_delay=0.2)
    deadline = time.monotonic() + 120
    while True:  # kill the shard process once two chunks are committed and the next one is in the model
        assert proc.poll() is None, f"the worker ended before it could be killed:\n{read_worker_log(proc)}"
        counts = view.item_counts("run-parent-killed")
        writers = _writers(proc.pid)
        if counts.get("staged", 0) >= 2 * chunk and counts.get("in_flight", 0) and writers:
            os.kill(proc.pid, signal.SIGKILL)
            break
        assert time.monotonic() < deadline, f"no progress to kill: {counts}\n{read_worker_log(proc)}"
        time.sleep(0.01)
    assert proc.wait(30) == -signal.SIGKILL
    (writer,) = writers
    deadline = time.monotonic() + 30
    while not _gone(writer):  # it commits what it was handed, then sees the pipe closed and exits
        assert time.monotonic() < deadline, "the writer process outlived its shard process"
        time.sleep(0.05)

    at_kill = view.items("run-parent-killed")
    done = {t for t, (status, _, _) in at_kill.items() if status == "staged"}
    assert len(done) >= 2 * chunk and len(done) % chunk == 0, "only whole chunks commit"
    assert set(view.staging("run-parent-killed")) == done, "outputs and item states commit together"

    totals = infer_shard(settings, "run-parent-killed", 0, predictor=model)  # the retry, in a fresh process
    assert totals.staged == n - len(done)
    assert {status for status, _, _ in view.items("run-parent-killed").values()} == {"staged"}
    _all_loaded(settings, view, "run-parent-killed", ids)


def test_a_refused_write_in_the_writer_is_raised_typed_and_without_ticket_text_then_the_retry_finishes(
    planned, view, model, pg_engine
):
    n = 30
    settings, ids = planned("run-refused", n, 10)
    with writing(pg_engine) as conn:  # a constraint that refuses every result row (the server quotes the row)
        conn.execute(sa.text("ALTER TABLE ticket_results ADD CONSTRAINT refuse_all CHECK (summary IS NULL)"))
    with pytest.raises(DatabaseRefused) as raised:
        infer_shard(settings, "run-refused", 0, predictor=model, load=True)
    text = str(raised.value) + repr(raised.value.__dict__) + repr(pickle.dumps(raised.value))
    assert "refuse_all" in text, "the constraint is named"
    with pg_engine.connect() as conn:
        bodies = [b for b in conn.scalars(sa.select(tickets.c.body)) if b]
    assert not [b for b in bodies if b[:20] in text], "no ticket text crosses from the writer"
    assert view.results() == {} and set(view.statuses("run-refused").values()) == {"planned"}

    with writing(pg_engine) as conn:
        conn.execute(sa.text("ALTER TABLE ticket_results DROP CONSTRAINT refuse_all"))
    totals = infer_shard(settings, "run-refused", 0, predictor=model, load=True)
    assert totals.loaded == n
    _all_loaded(settings, view, "run-refused", ids)


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not today")


def test_errors_cross_from_the_writer_as_the_library_raises_them():
    kind, error = pickle.loads(_error_payload(KeyError("T-7")))
    assert (kind, type(error), str(error)) == ("error", RuntimeError, "writer process: KeyError: 'T-7'")
    kind, error = pickle.loads(_error_payload(DatabaseRefused("the database refused a write: x", remedy="r")))
    assert (type(error), str(error), error.remedy) == (DatabaseRefused, "the database refused a write: x", "r")
    kind, error = pickle.loads(_error_payload(_Unpicklable("line one\nline two")))
    assert (type(error), str(error)) == (RuntimeError, "writer process: _Unpicklable: line one")
