"""Runs triggered through the REST API of a real Airflow, as an operator or a client script would."""

from __future__ import annotations

import datetime as dt

from inference.window import window_for_date

DAY = dt.date(2026, 6, 10)


def test_trigger_through_rest_processes_every_ticket_of_the_window_once(airflow, seed, view, run_id_for):
    seed(30, 1, DAY, 1001)
    window = window_for_date(DAY)
    run = airflow.trigger(
        {"window_start": DAY.isoformat(), "window_end": DAY.isoformat(), "reprocess": False},
        run_id=run_id_for("rest__"),
    )
    run_id = run["dag_run_id"]
    assert run["state"] == "queued" and run["logical_date"] is None and run["conf"]["window_start"] == DAY.isoformat()

    final = airflow.wait_run(run_id)
    assert final["state"] == "success", airflow.task_states(run_id)

    source = view.window_tickets(*window)
    wanted = view.non_empty(source)
    assert len(source) == 30 and wanted
    results = view.results(source)
    assert sorted(r.ticket_id for r in results) == sorted(wanted), "every non-empty ticket has exactly one result"
    assert {r.run_id for r in results} == {run_id}
    row = view.run_row(run_id)
    assert (row.window_start, row.window_end) == (window.start, window.end)
    assert row.status == "succeeded"
    assert (row.backlog, row.succeeded, row.failed) == (len(source), len(wanted), 0)
    assert row.skipped == len(source) - len(wanted)
