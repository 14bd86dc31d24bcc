"""Runs triggered through the REST API of a real Airflow, as an operator's script or another service would."""

from __future__ import annotations

import json

import pytest

from inference.window import window_for_date

DAG = "ticket_batch_inference"


def test_trigger_through_rest_processes_every_ticket_of_the_window_once(airflow, rest_scenario, view):
    run_id, day = rest_scenario.run_id, rest_scenario.day
    created = rest_scenario.extra["created"]
    assert created["logical_date"] is None and created["conf"]["window_start"] == day.isoformat()
    assert created["triggered_by"] == "rest_api" and created["triggering_user_name"] == "operator"

    final = airflow.wait_run(run_id)
    assert final["state"] == "success", airflow.task_states(run_id)

    window = window_for_date(day)
    source = view.window_tickets(*window)
    wanted = view.non_empty(source)
    assert len(source) == 20 and wanted
    results = view.results(source)
    assert sorted(r.ticket_id for r in results) == sorted(wanted), "every non-empty ticket has exactly one result"
    assert {r.run_id for r in results} == {run_id}
    row = view.run_row(run_id)
    assert (row.window_start, row.window_end) == (window.start, window.end)
    assert row.status == "succeeded"
    assert (row.backlog, row.succeeded, row.failed, row.skipped) == (
        len(source),
        len(wanted),
        0,
        len(source) - len(wanted),
    )
    items = view.items(run_id)
    assert sorted(items) == sorted(source), "one run item per ticket of the window, no other"


@pytest.mark.parametrize(
    ("conf", "param"),
    [
        ({"limit": -1}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"window_start": "x' OR 1=1"}, "window_start"),
        ({"reprocess": "yes"}, "reprocess"),
        ({"shards": 0}, "shards"),
    ],
    ids=["limit-negative", "limit-string", "window_start-injection", "reprocess-string", "shards-zero"],
)
def test_invalid_params_are_rejected_by_the_api_naming_the_param(airflow, conf, param):
    run_id = "rejected__" + param
    r = airflow.api(
        "POST", f"/api/v2/dags/{DAG}/dagRuns", json={"logical_date": None, "conf": conf, "dag_run_id": run_id}
    )
    assert r.status_code == 400, r.text
    detail = r.json()["detail"]
    assert f"param {param}" in detail, detail
    assert airflow.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}").status_code == 404, "no run was created"


def test_unknown_option_is_accepted_by_the_api_and_fails_the_run_in_plan(
    airflow, unknown_option_scenario, receivers, view
):
    """The JSON schema of the params does not forbid extra keys, so the API creates the run; plan's own
    check (inference.options) must fail it, final (no retry), before anything is written."""
    run_id = unknown_option_scenario.run_id
    final = airflow.wait_run(run_id)
    assert final["state"] == "failed"
    tis = {ti["task_id"]: ti for ti in airflow.task_instances(run_id)}
    assert tis["plan_run"]["state"] == "failed" and tis["plan_run"]["try_number"] == 1
    plan_log = airflow.task_logs(run_id, task_id="plan_run")
    assert "InvalidOptions" in plan_log and "unknown run option(s): 'surprise'" in plan_log
    assert view.run_row(run_id) is None, "plan recorded nothing"
    assert not [r for r in view.results() if r.run_id == run_id], "no results"
    assert view.items(run_id) == {}

    webhook = [json.loads(m.body) for m in receivers.all("webhook")]
    plan_alerts = [p for p in webhook if p["run_id"] == run_id and p["task_id"] == "plan_run"]
    assert [p["error_class"] for p in plan_alerts] == ["InvalidOptions"]

    # The tasks after plan that run whatever happened (trigger rule all_done) find no planned run: the
    # steps in between skip; finish_run fails at once (no retry), so the run is failed and says why. It does
    # not alert a second time for the same incident: plan_run's alert already named the cause.
    assert tis["load_results"]["state"] == "skipped", tis["load_results"]
    assert tis["finish_run"]["state"] == "failed" and tis["finish_run"]["try_number"] == 1, tis["finish_run"]
    finish_log = airflow.task_logs(run_id, task_id="finish_run")
    assert "has not been planned" in finish_log
    assert "ALERT DEFERRED for finish_run (RunNotFound): plan_run failed (InvalidOptions)" in finish_log
    assert not [p for p in webhook if p["run_id"] == run_id and p["task_id"] == "finish_run"]
