"""`airflow backfill create` over three past days, as an operator re-runs history, and a second backfill
that reprocesses the completed runs: each run processes exactly its own nightly window, and the second pass
changes nothing."""

from __future__ import annotations

import time

from inference.window import window_for_date

DAG = "ticket_batch_inference"


def _backfill_runs(airflow) -> list[dict]:
    r = airflow.api("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"limit": 100})
    assert r.status_code == 200, r.text
    return sorted(
        (run for run in r.json()["dag_runs"] if run["run_type"] == "backfill"), key=lambda x: x["logical_date"]
    )


def _wait_backfill_done(airflow, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = airflow.api("GET", "/api/v2/backfills", params={"dag_id": DAG})
        assert r.status_code == 200, r.text
        backfills = sorted(r.json()["backfills"], key=lambda b: b["id"])
        if backfills and backfills[-1]["completed_at"]:
            return backfills[-1]
        assert time.monotonic() < deadline, f"backfill not completed after {timeout:.0f}s: {backfills}"
        airflow.check_alive()
        time.sleep(1)


def test_backfill_runs_each_day_on_its_own_window_and_a_reprocessing_backfill_converges(
    airflow, backfill_scenario, view
):
    days = backfill_scenario.days
    out, _ = backfill_scenario.extra["cli"].communicate(timeout=180)
    assert backfill_scenario.extra["cli"].returncode == 0, out

    runs = _backfill_runs(airflow)
    assert [r["logical_date"][:10] for r in runs] == [d.isoformat() for d in days], runs
    for run in runs:
        assert airflow.wait_run(run["dag_run_id"], timeout=300)["state"] == "success", airflow.task_states(
            run["dag_run_id"]
        )
    _wait_backfill_done(airflow, 60)

    rows = view.runs([r["dag_run_id"] for r in runs])
    windows = {r["dag_run_id"]: window_for_date(day) for r, day in zip(runs, days, strict=True)}
    in_window = {run_id: view.window_tickets(*w) for run_id, w in windows.items()}
    every_ticket = sorted({t for tickets in in_window.values() for t in tickets})
    assert len(every_ticket) == 60
    processed: list[str] = []
    for run in runs:
        run_id, window = run["dag_run_id"], windows[run["dag_run_id"]]
        row = rows[run_id]
        assert (row.window_start, row.window_end) == (window.start, window.end), f"run {run_id}"
        assert (run["data_interval_start"][:19], run["data_interval_end"][:19]) == (
            window.start.isoformat()[:19],
            window.end.isoformat()[:19],
        )
        items = view.items(run_id)
        assert items, f"run {run_id} processed nothing"
        assert set(items) <= set(in_window[run_id]), "a run processes tickets of its own window only"
        assert row.status == "succeeded" and row.backlog == len(items) and row.failed == 0
        processed += items
    # A ticket created before a cutoff and edited after it belongs to both windows: the earlier run computes
    # it, the later one finds its result current. Every ticket exactly once over the three runs.
    assert sorted(processed) == every_ticket, "each ticket processed by exactly one run"
    results = view.results(every_ticket)
    wanted = view.non_empty({t: v for tickets in in_window.values() for t, v in tickets.items()})
    assert sorted(r.ticket_id for r in results) == sorted(wanted), "one result per non-empty ticket"
    for r in results:
        assert r.ticket_id in in_window[r.run_id], f"ticket {r.ticket_id} written by {r.run_id}, not its window"
    before = {r.ticket_id: tuple(r) for r in results}

    # The same three days again, reprocessing the completed runs: Airflow clears and re-runs them.
    dates = backfill_scenario.extra["dates"]
    airflow.cli("backfill", "create", "--dag-id", DAG, *dates, "--reprocess-behavior", "completed")
    again = _backfill_runs(airflow)
    assert [r["dag_run_id"] for r in again] == [r["dag_run_id"] for r in runs], "the same runs, cleared"
    for run in again:
        assert airflow.wait_run(run["dag_run_id"], timeout=300)["state"] == "success", airflow.task_states(
            run["dag_run_id"]
        )
    _wait_backfill_done(airflow, 60)

    after = {r.ticket_id: tuple(r) for r in view.results(every_ticket)}
    assert after == before, "nothing rewritten: same rows, same writers, same timestamps"
    assert len(view.results()) == len({r.ticket_id for r in view.results()}), "no duplicate results"
    rows = view.runs([r["dag_run_id"] for r in again])
    for run, day in zip(again, days, strict=True):
        window = window_for_date(day)
        row = rows[run["dag_run_id"]]
        assert (row.window_start, row.window_end, row.status) == (window.start, window.end, "succeeded")
        assert row.failed == 0 and row.succeeded == 0, "the rerun found nothing left to do"
