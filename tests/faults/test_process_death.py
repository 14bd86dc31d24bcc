"""Process death: infer_shard runs in a real subprocess that is SIGKILLed, then retried (PostgreSQL)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import sqlalchemy as sa

from inference.pipeline import finish_run, infer_shard, load_results, plan_run
from inference.store.db import writing
from inference.store.schema import tickets
from inference.window import window_for_date
from tests.support.poison import POISON

DAY = dt.date(2026, 11, 30)
WINDOW = window_for_date(DAY)


def test_sigkill_mid_shard_then_retry_finishes_without_redoing_committed_chunks(
    pg_settings, add_tickets, shard_worker, read_worker_log, view, model
):
    n, chunk = 100, 10
    settings = pg_settings(chunk_size=chunk)
    ids = add_tickets(n)
    assert [s.tickets for s in plan_run(settings, "run-kill", WINDOW)] == [n]

    proc = shard_worker(settings, "run-kill", 0, forward_delay=0.2)
    deadline = time.monotonic() + 120
    while True:  # kill once two chunks are committed and the next one is in the model
        assert proc.poll() is None, f"the worker ended before it could be killed:\n{read_worker_log(proc)}"
        counts = view.item_counts("run-kill")
        if counts.get("staged", 0) >= 2 * chunk and counts.get("in_flight", 0):
            os.kill(proc.pid, signal.SIGKILL)
            break
        assert time.monotonic() < deadline, f"no progress to kill: {counts}\n{read_worker_log(proc)}"
        time.sleep(0.01)
    assert proc.wait(30) == -signal.SIGKILL

    at_kill = view.items("run-kill")
    done = {t for t, (status, _, _) in at_kill.items() if status == "staged"}
    in_flight = {t for t, (status, _, attempts) in at_kill.items() if status == "planned" and attempts == 1}
    assert len(done) >= 2 * chunk and len(done) % chunk == 0, "only whole chunks commit"
    # the chunk in the model was claimed (attempt counted) before it ran; with write-behind, the one
    # before it may still have been on its way to the database
    assert len(in_flight) in (chunk, 2 * chunk)
    assert {attempts for t, (_, _, attempts) in at_kill.items() if t not in done | in_flight} == {0}
    staged_rows = view.staging("run-kill")
    assert set(staged_rows) == done, "outputs and item states commit together"

    totals = infer_shard(settings, "run-kill", 0, predictor=model)  # the retry, in a fresh process

    assert totals.staged == n - len(done), "the retry computes exactly what was not committed"
    assert totals.failed == totals.skipped == 0
    after = view.items("run-kill")
    assert {status for status, _, _ in after.values()} == {"staged"}
    assert {t: after[t][2] for t in in_flight} == dict.fromkeys(in_flight, 2), "in-flight items redone once more"
    assert {t: after[t][2] for t in ids if t not in in_flight} == dict.fromkeys(set(ids) - in_flight, 1)
    restaged = view.staging("run-kill")
    assert len(restaged) == n
    assert {t: restaged[t] for t in done} == staged_rows, "committed outputs were not recomputed"

    load_results(settings, "run-kill")
    summary = finish_run(settings, "run-kill")
    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", n, 0)
    results, source = view.results(), view.source_hashes()
    assert sorted(results) == sorted(ids)  # one row per ticket (ticket_id is the key)
    assert {t: r["content_hash"] for t, r in results.items()} == {t: source[t] for t in ids}
    assert {r["run_id"] for r in results.values()} == {"run-kill"}


def test_a_ticket_that_kills_the_worker_is_dead_lettered_and_the_shard_finishes(
    pg_settings, add_tickets, shard_worker, read_worker_log, view, poison_token_id, pg_engine
):
    n, chunk = 40, 10
    # every try is a fresh worker that loads the model; the embedding head alone keeps that start cheap
    # (the category head encodes its few-shot examples at load) and runs the same forward passes
    settings = pg_settings(chunk_size=chunk, heads=("embedding",))
    ids = add_tickets(n)
    poison = ids[chunk + 5]  # in the second chunk: the first one is done before the first death
    with writing(pg_engine) as conn:
        conn.execute(
            sa.update(tickets)
            .where(tickets.c.ticket_id == int(poison))
            .values(body=f"My {POISON} order never shipped.")
        )
    plan_run(settings, "run-poison", WINDOW)

    codes, left = [], []  # exit codes, and (items, staging) as each try left them
    for _ in range(settings.max_attempts + 2):  # Airflow retries the task until it exits 0
        proc = shard_worker(settings, "run-poison", 0, kill_on_token=poison_token_id)
        codes.append(proc.wait(180))
        left.append((view.items("run-poison"), view.staging("run-poison")))
        if codes[-1] == 0:
            break
        assert codes[-1] == -signal.SIGKILL, read_worker_log(proc)
    assert codes == [-signal.SIGKILL] * settings.max_attempts + [0], "bounded: dies max_attempts times, then done"

    items, staging = dict(left[-1][0]), left[-1][1]
    assert items.pop(poison) == ("failed", "process_crash", settings.max_attempts)
    assert {status for status, _, _ in items.values()} == {"staged"}
    poison_attempts = [state[poison][2] for state, _ in left]
    assert poison_attempts == [*range(1, settings.max_attempts + 1), settings.max_attempts]
    for k in range(1, settings.max_attempts):  # after the first death, the poison went to the model alone
        before, now = left[k - 1][0], left[k][0]
        taken = {t for t in now if now[t][2] > before[t][2] and now[t][0] != "staged"}
        assert taken == {poison}, f"try {k + 1} died with {sorted(taken)} in the model"
    for state, rows in left[:-1]:  # what a dead try had committed is never redone
        done = {t for t, (status, _, _) in state.items() if status == "staged"}
        assert {t: items[t][2] for t in done} == {t: state[t][2] for t in done}
        assert {t: staging[t] for t in done} == rows
    assert max(attempts for _, _, attempts in items.values()) <= 2
    [failure] = view.failures()
    assert (failure["ticket_id"], failure["error_class"], failure["status"], failure["retryable"]) == (
        poison,
        "process_crash",
        "dead_letter",
        False,
    )
    assert failure["attempt"] == settings.max_attempts
    assert POISON not in failure["message"]

    load_results(settings, "run-poison")
    summary = finish_run(settings, "run-poison")  # 1 of 40 is under the default 5% threshold
    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", n - 1, 1)
    assert summary["reasons"] == {"process_crash": 1}
    assert sorted(view.results()) == sorted(set(ids) - {poison})
